"""The priority ceiling of the ledger's write lock (services/priority.py): a lowered thread
(a runner child's) writes to the ledger at the priority it had before, and is lowered again
after; other threads are untouched (Linux nice values are per thread)."""

from __future__ import annotations

import os
import resource
import sys
import threading

import pytest

from services import priority
from services.ledger.db import Database

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="per-thread nice values are Linux's")


def _may_raise(base: int) -> bool:
    """Root, or an RLIMIT_NICE that allows going back to the ``base`` nice value."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    return os.geteuid() == 0 or soft == resource.RLIM_INFINITY or 20 - soft <= base


def _in_a_lowered_thread(fn):
    """Run ``fn(base)`` in a new thread lowered by 7 (the test process stays as it is)."""
    out: dict = {}

    def body() -> None:
        try:
            priority.lower(7)
            out["value"] = fn(priority.BASE)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = exc

    saved = priority.BASE
    try:
        t = threading.Thread(target=body)
        t.start()
        t.join()
    finally:
        priority.BASE = saved
    if "error" in out:
        raise out["error"]
    return out["value"]


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def test_a_lowered_thread_writes_to_the_ledger_at_its_base_priority(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    main_before = _nice()

    def seen(base: int) -> tuple:
        lowered = _nice()
        with db.tx(write=True):
            writing = _nice()
        with db.tx(write=False):
            reading = _nice()
        return base, lowered, writing, reading, _nice()

    base, lowered, writing, reading, after = _in_a_lowered_thread(seen)
    db.close()
    assert lowered == base + 7 and reading == lowered and after == lowered
    assert writing == (base if _may_raise(base) else lowered)
    assert _nice() == main_before            # the test's own thread never moved


def test_without_a_lowered_priority_the_ceiling_does_nothing():
    saved, priority.BASE = priority.BASE, None
    try:
        before = _nice()
        with priority.ceiling():
            assert _nice() == before
    finally:
        priority.BASE = saved
