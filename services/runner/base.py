"""The runner's interface: what heavy work is, how it reports, how it fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class JobDied(RuntimeError):
    """The process running the work ended before it answered (killed, out of memory)."""


class JobCancelled(RuntimeError):
    """The work was cancelled before it finished."""


class Progress(Protocol):
    """What work reports through: ``progress(fraction, text)`` (0..1, plain words)."""

    def __call__(self, fraction: float, text: str) -> None: ...


def no_progress(_fraction: float, _text: str) -> None:
    """The progress of work nobody watches."""


Work = Callable[..., T]
"""``fn(services, progress, *args)``: module-level, picklable arguments, returns data."""


class Runner(Protocol):
    """Where heavy work runs (``InlineRunner``, ``ProcessRunner`` or its two ``Lanes``)."""

    background_slots: int
    in_process: bool
    """True when work runs in the caller's process (a caller need not read first what it
    would hand over)."""

    def call(self, fn: Work, *args: Any, progress: Progress = no_progress,
             cancelled: Callable[[], bool] | None = None, quick: bool = False) -> Any:
        """``fn(services, progress, *args)`` now; its result or its error. ``JobDied`` if
        its process ended first, ``JobCancelled`` once ``cancelled()`` turned true.
        ``quick``: work that spends nothing and must not queue behind heavy work."""
        ...

    def bind(self, services: Any) -> None:
        """The services inline work runs with (the caller's own)."""
        ...

    def warm(self, fn: Work) -> None:
        """Start a child now and run ``fn`` in it, without waiting (the boot warm-up)."""
        ...

    def close(self) -> None:
        """Stop any process the runner started."""
        ...
