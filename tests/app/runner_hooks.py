"""Hooks a test installs in a runner child (``ProcessRunner(initializer=...)``): each stops
the child's work at a known point, after writing the child's pid to ``<data dir>/started``,
so a test can kill it there. Module-level, so a spawned child can import them."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from services import anonymizer
from services.studio import pgm
from services.views import releases

FOREVER = 3600.0


def started_file(data_dir: Path) -> Path:
    return Path(data_dir) / "started"


def _stop_here(services: Any) -> None:
    started_file(services.config.data_dir).write_text(str(os.getpid()))
    time.sleep(FOREVER)                     # until the test kills this process


def _stop_at(services: Any, owner: Any, name: str, *, after: bool = False) -> None:
    """Replace ``owner.name`` by a copy that stops the child before (or ``after``) it runs."""
    real = getattr(owner, name)

    def stopped(*args, **kwargs):
        if not after:
            _stop_here(services)
        out = real(*args, **kwargs)
        if after:
            _stop_here(services)
        return out

    setattr(owner, name, stopped)


def mid_release(services: Any) -> None:
    """Stop inside the door's draw: after its first transaction, before it writes."""
    _stop_at(services, releases, "aggregates")


def mid_synthetic_fit(services: Any) -> None:
    """Stop a synthetic copy at its model fit (the measurements are drawn, nothing stored)."""
    _stop_at(services, pgm, "synthesize_codes")


def mid_anonymize(services: Any) -> None:
    """Stop the anonymizer before it returns its table."""
    _stop_at(services, anonymizer, "anonymize")


def after_release(services: Any) -> None:
    """Stop a release after the door stored it, before the answer goes back."""
    from services.session import Session

    _stop_at(services, Session, "serve", after=True)
