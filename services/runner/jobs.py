"""Background jobs: work a page starts and then polls, on whichever worker its poll lands.

A job's record lives in a ``JobStore`` under the data directory (``services.studio.store``
keeps the studio's), so every web worker reads the same state: queued, running (a progress
fraction and text), done (its result) or error (a message). The process that started the job
beats its heart: every ``HEARTBEAT`` seconds it rewrites the record of each job it holds, and
reads back whether someone asked to cancel it. A record not rewritten for ``STALE_BEATS``
heartbeats belongs to a process that died (a web worker killed, a restart): readers show it as
failed (``stale``). A job whose runner process died is marked failed at once. Either way
nothing was charged unless the ledger recorded a release before the death (the door charges
in the same transaction that stores the release): the record keeps the caller's ``mark``
(e.g. the user's release count at the start) so a reader can tell which.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from dp_engine.errors import DPError
from services.runner.base import JobCancelled, JobDied, Runner, Work

log = logging.getLogger(__name__)
HEARTBEAT = 10.0
"""Seconds between two beats of a running job (tests patch it small)."""
STALE_BEATS = 3
"""Beats missed before a job reads as failed: a dead job shows within STALE_BEATS·HEARTBEAT."""
UPDATE_EVERY = 0.25
"""Seconds between two progress writes within one stage (a new stage is always written)."""
FAILED = ("The run failed on the server. Check the ledger for what was charged, then try "
          "again; if it fails again, tell the administrator.")
DIED = "died"
CANCELLED = "cancelled"
RUNNING = ("queued", "running")


def stale(record: dict[str, Any], now: float | None = None) -> bool:
    """Whether a queued or running ``record`` lost its heartbeat (its process died)."""
    now = time.time() if now is None else now
    return record.get("state") in RUNNING and \
        now - float(record.get("updated", 0)) > STALE_BEATS * HEARTBEAT


class JobStore(Protocol):
    """Where job records live (one JSON record per token, readable by every worker)."""

    def new(self, user: str, kind: str, **fields: Any) -> str: ...

    def update(self, user: str, token: str, **fields: Any) -> dict[str, Any] | None: ...

    def finish(self, user: str, token: str, result: dict[str, Any],
               csv: str | None) -> None: ...

    def request_cancel(self, user: str, token: str) -> bool: ...

    def cancel_requested(self, user: str, token: str) -> bool: ...


class _Held:
    """A job this process runs: where its record is and whether it was cancelled."""

    def __init__(self, store: JobStore, user: str, token: str) -> None:
        self.store, self.user, self.token = store, user, token
        self.cancel = threading.Event()
        self.lock = threading.Lock()        # the heartbeat never writes over a newer state

    def update(self, **fields: Any) -> dict[str, Any] | None:
        with self.lock:
            return self.store.update(self.user, self.token, **fields)


class Jobs:
    """Starts background jobs on a runner and beats their hearts (one per app)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self._slots = threading.BoundedSemaphore(max(1, runner.background_slots))
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._beating = False

    def submit(self, store: JobStore, user: str, kind: str, fn: Work, *args: Any,
               mark: Any = None) -> str:
        """Queue ``fn(services, progress, *args)`` for ``user``; returns the token the page
        polls by. ``fn`` returns (result dict, CSV text or None)."""
        token = store.new(user, kind, mark=mark)
        held = _Held(store, user, token)
        with self._lock:
            self._held[token] = held
            if not self._beating:
                self._beating = True
                threading.Thread(target=self._beat, name="runner-heartbeat",
                                 daemon=True).start()
        threading.Thread(target=self._run, args=(held, fn, args),
                         name=f"job-{token[:8]}", daemon=True).start()
        return token

    def cancel(self, store: JobStore, user: str, token: str) -> bool:
        """Ask for ``user``'s job ``token`` to stop (whichever worker runs it)."""
        with self._lock:
            held = self._held.get(token)
        if held is not None and held.user == user:
            held.cancel.set()
        return store.request_cancel(user, token)

    def _run(self, held: _Held, fn: Work, args: tuple) -> None:
        token = held.token
        try:
            with self._slots:
                if held.cancel.is_set():
                    raise JobCancelled("cancelled")
                held.update(state="running", progress=0.01, text="Starting…")
                result, csv = self.runner.call(fn, *args, progress=self._reporter(held),
                                               cancelled=held.cancel.is_set)
        except JobCancelled:
            held.update(state="error", failure=CANCELLED, text="Cancelled.")
        except JobDied:
            log.warning("job %s: its runner process died", token)
            held.update(state="error", failure=DIED, text="The run stopped: its process ended.")
        except DPError as exc:
            held.update(state="error", text=str(exc))
        except Exception:
            log.exception("job %s failed", token)
            held.update(state="error", text=FAILED)
        else:
            with held.lock:
                held.store.finish(held.user, token, result, csv)
        finally:
            with self._lock:
                self._held.pop(token, None)

    @staticmethod
    def _reporter(held: _Held) -> Callable[[float, str], None]:
        """The job's ``progress(fraction, text)``: every new stage (text) is written at once,
        so a poll sees each one; within a stage, a write at most every ``UPDATE_EVERY`` s.
        The bar never moves back."""
        last: dict[str, Any] = {"at": 0.0, "text": None, "fraction": 0.0}

        def progress(fraction: float, text: str) -> None:
            now = time.monotonic()
            fraction = max(last["fraction"], min(float(fraction), 0.99))
            if text != last["text"] or now - last["at"] >= UPDATE_EVERY:
                last.update(at=now, text=text, fraction=fraction)
                held.update(state="running", progress=fraction, text=text)

        return progress

    def _beat(self) -> None:
        """Rewrite each held job's record every beat; pick up cancels asked elsewhere."""
        while True:
            time.sleep(HEARTBEAT)
            with self._lock:
                held = list(self._held.values())
            for h in held:
                try:
                    h.update()
                    if h.store.cancel_requested(h.user, h.token):
                        h.cancel.set()
                except OSError:
                    log.warning("job %s: heartbeat not written", h.token, exc_info=True)
