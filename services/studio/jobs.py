"""Long studio runs in the background: a small job runner, at most ``WORKERS`` at a time.

Each job gets its own daemon thread that waits for one of ``WORKERS`` process-wide slots
(a semaphore): like a thread pool, but a worker thread that dies (killed, or its server
stopped) never leaves the queue stuck, as a pool's dead workers are not replaced.
The page submits a job and gets its token at once; the job's state (queued, running with a
progress fraction and text, done with its result, or error with a message) lives in the
``RunStore``, which every worker reads, so the page's polls may land on any worker. The work
itself runs in the worker that took the request. A ``DPError`` is the user's message; any
other failure is logged and shown as a plain message (never a traceback).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from dp_engine.errors import DPError
from services.studio.store import RunStore

log = logging.getLogger(__name__)
WORKERS = 2
FAILED = ("The run failed on the server. Check the ledger for what was charged, then try "
          "again; if it fails again, tell the administrator.")
UPDATE_EVERY = 0.25
"""Seconds between two progress writes within one stage (a new stage is always written)."""

Progress = Callable[[float, str], None]
Work = Callable[[Progress], tuple[dict[str, Any], str | None]]

_slots = threading.BoundedSemaphore(WORKERS)


def _reporter(store: RunStore, user: str, token: str) -> Progress:
    """The job's ``progress(fraction, text)``: every new stage (text) is written at once, so
    a poll sees each one; within a stage, a write at most every ``UPDATE_EVERY`` s. The bar
    never moves back."""
    last = {"at": 0.0, "text": None, "fraction": 0.0}

    def progress(fraction: float, text: str) -> None:
        now = time.monotonic()
        fraction = max(last["fraction"], min(float(fraction), 0.99))
        if text != last["text"] or now - last["at"] >= UPDATE_EVERY:
            last.update(at=now, text=text, fraction=fraction)
            store.update(user, token, state="running", progress=fraction, text=text)

    return progress


def run_job(store: RunStore, user: str, token: str, work: Work) -> None:
    """Run ``work`` and record its result or its failure (what a job's thread executes)."""
    store.update(user, token, state="running", progress=0.01, text="Starting…")
    try:
        result, csv = work(_reporter(store, user, token))
    except DPError as exc:
        store.fail(user, token, str(exc))
    except Exception:
        log.exception("studio job %s failed", token)
        store.fail(user, token, FAILED)
    else:
        store.finish(user, token, result, csv)


def submit(store: RunStore, user: str, kind: str, work: Work) -> str:
    """Queue ``work`` for ``user``; returns the token the page polls and downloads by."""
    token = store.new(user, kind)

    def slot() -> None:
        with _slots:
            run_job(store, user, token, work)

    threading.Thread(target=slot, name=f"studio-job-{token[:8]}", daemon=True).start()
    return token
