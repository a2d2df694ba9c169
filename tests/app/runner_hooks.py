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


def mid_release(services: Any) -> None:
    """Stop inside the door's draw: after its first transaction, before it writes."""
    real = releases.aggregates

    def stopped(*args, **kwargs):
        _stop_here(services)
        return real(*args, **kwargs)

    releases.aggregates = stopped


def mid_synthetic_fit(services: Any) -> None:
    """Stop a synthetic copy at its model fit (the measurements are drawn, nothing stored)."""
    real = pgm.synthesize_codes

    def stopped(*args, **kwargs):
        _stop_here(services)
        return real(*args, **kwargs)

    pgm.synthesize_codes = stopped


def mid_anonymize(services: Any) -> None:
    """Stop the anonymizer before it returns its table."""
    real = anonymizer.anonymize

    def stopped(*args, **kwargs):
        _stop_here(services)
        return real(*args, **kwargs)

    anonymizer.anonymize = stopped


def after_release(services: Any) -> None:
    """Stop a release after the door stored it, before the answer goes back."""
    from services.session import Session

    real = Session.serve

    def stopped(self, *args, **kwargs):
        answers = real(self, *args, **kwargs)
        _stop_here(services)
        return answers

    Session.serve = stopped
