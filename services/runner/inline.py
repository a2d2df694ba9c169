"""Heavy work in the caller's process (tests and ``make run``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.runner.base import JobCancelled, Progress, Work, no_progress


class InlineRunner:
    """Runs work in the calling thread with the app's own services."""

    background_slots = 2
    in_process = True
    """Work runs in the caller's process (nothing to hand over)."""
    """Background jobs (``services.runner.jobs``) running at once in this process."""

    def __init__(self) -> None:
        self.services: Any = None

    def bind(self, services: Any) -> None:
        self.services = services

    def call(self, fn: Work, *args: Any, progress: Progress = no_progress,
             cancelled: Callable[[], bool] | None = None, quick: bool = False) -> Any:
        del quick                      # one lane: the caller's own thread
        if cancelled is None:
            return fn(self.services, progress, *args)

        def checked(fraction: float, text: str) -> None:
            if cancelled():            # a thread cannot be killed: it stops at its next report
                raise JobCancelled("cancelled")
            progress(fraction, text)

        return fn(self.services, checked, *args)

    def warm(self, fn: Work) -> None:
        """Nothing to start: work runs in this process, which warms itself."""

    def close(self) -> None:
        """Nothing to stop."""
