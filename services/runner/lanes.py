"""Two lanes of runner children: heavy work, and quick work that must not queue behind it.

With one child per worker, a quote or a preview (a plan from the noise bank and a few
simulated rows: tenths of a second) waited for whatever release or studio fit the child was
running, seconds under load. The quick lane is one more lower-priority child per worker that
only runs screens which spend nothing (previews and quotes), so their wait is their own work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.runner.base import Progress, Work, no_progress
from services.runner.pool import ProcessRunner


class Lanes:
    """``heavy`` children for releases, studio jobs and the anonymizer; ``quick`` for
    previews and quotes (``call(..., quick=True)``)."""

    in_process = False

    def __init__(self, heavy: ProcessRunner, quick: ProcessRunner) -> None:
        self.heavy = heavy
        self.quick = quick
        self.background_slots = heavy.background_slots

    def bind(self, services: Any) -> None:
        """Children build their own services; nothing to bind."""

    def call(self, fn: Work, *args: Any, progress: Progress = no_progress,
             cancelled: Callable[[], bool] | None = None, quick: bool = False) -> Any:
        lane = self.quick if quick else self.heavy
        return lane.call(fn, *args, progress=progress, cancelled=cancelled)

    def pids(self) -> list[int]:
        """Every child's process id (tests and operators)."""
        return [*self.heavy.pids(), *self.quick.pids()]

    def warm(self, fn: Work) -> None:
        self.heavy.warm(fn)
        self.quick.warm(fn)

    def close(self) -> None:
        self.heavy.close()
        self.quick.close()
