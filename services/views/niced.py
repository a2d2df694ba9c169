"""Uncached work at a lower CPU priority, so cached answers are not starved (issue 14).

A cached answer is a ledger read; an uncached one plans per-group ε (the quantile error
model simulates releases), reads aggregates and draws noise: CPU-bound Python in the same
web worker. Under load the two compete for the same cores and the cached reader waits
(measured: cached p95 ≈ 0.5 s while 8 sessions released fresh views of 1e7 rows). The heavy
steps run in a fresh thread whose OS nice value is raised — on Linux a per-thread attribute —
while the request thread waits on it (the GIL is released while waiting), so the scheduler
serves the cached readers first. Niceness is raised, never lowered, so no privilege is
needed; ``COHORT_NICE_UNCACHED=0`` runs everything inline.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
NICE = 10
"""Added to the nice value of the thread that runs uncached work (0 is the default)."""


def _enabled() -> bool:
    return hasattr(os, "setpriority") and os.environ.get("COHORT_NICE_UNCACHED", "1") != "0"


def niced(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a fresh, lower-priority thread; its result or its error."""
    if not _enabled() or getattr(_local, "inside", False):
        return fn(*args, **kwargs)
    out: dict[str, Any] = {}

    def run() -> None:
        _local.inside = True
        with contextlib.suppress(OSError):   # not permitted: run at the normal priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the caller's thread, as if inline
            out["error"] = exc

    worker = threading.Thread(target=run, name="uncached-release", daemon=True)
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


_local = threading.local()
