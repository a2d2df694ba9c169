"""Warm at boot what the first figure needs, in the background (issue 20, cold start).

``import app`` loads no heavy module it can do without (scipy's statistics and optimizer,
DuckDB, the studio's extras are imported where used), so the server answers within seconds.
The first figure would then pay for the rest: the engine's first plans and noise banks
(``services.ops.warmup.warm_engine``), plotly's validators, and — with
``COHORT_RUNNER_PROCESSES`` ≥ 1 — spawning the worker's runner child and building its services
(seconds). ``start`` does that work once, right after the app is built (``make run`` and
gunicorn's ``app:server``), in a daemon thread, and asks the runner to start a child that
warms its engine too, so a visitor arriving a few seconds after boot finds it done.

Nothing here reads a dataset's rows or releases anything: only public, synthetic inputs run
through the code paths, so warming costs no privacy budget and changes no ledger.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from services.ops.warmup import warm_engine, warm_job

log = logging.getLogger(__name__)


def warm_figures() -> float:
    """Build and serialize one plotly figure (its validators load on first use); seconds."""
    start = time.perf_counter()
    import plotly.graph_objects as go

    go.Figure(go.Bar(x=[1, 2], y=[3, 4])).to_plotly_json()
    return time.perf_counter() - start


def warm(services: Any) -> None:
    """The warm-up itself (the thread's body): never raises, logs what it did."""
    try:
        runner = getattr(services, "runner", None)
        if runner is not None:
            runner.warm(warm_job)            # a child starts and warms in parallel
        took = warm_engine() + warm_figures()
        log.info("Warm-up done in %.1f s (engine, figures%s).", took,
                 "" if getattr(runner, "in_process", True) else ", runner child starting")
    except Exception:  # noqa: BLE001 - a failed warm-up only leaves the first view slower
        log.warning("Warm-up failed; the first view will be slower.", exc_info=True)


def start(services: Any) -> threading.Thread:
    """Run ``warm`` in a daemon thread; returns it (tests and benches may join it)."""
    thread = threading.Thread(target=warm, args=(services,), name="warm-up", daemon=True)
    thread.start()
    return thread
