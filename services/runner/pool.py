"""Heavy work in child processes at a lower priority (the deployment).

Each web worker holds ``n`` children, started on first use from one long-lived thread (on
Linux a child's parent-death signal follows the thread that started it), each building its
own services from the configuration. A call takes an idle child, sends it the work over a
pipe and waits for progress reports and the answer; the waiting thread holds no GIL, so the
worker's other threads serve cached answers meanwhile. A child that ends (killed, out of
memory) is dropped and replaced by the next call, and its call raises ``JobDied``; a cancel
kills the child running it. Children end with their parent: ``PR_SET_PDEATHSIG`` (Linux)
and, everywhere, a watchdog thread that exits once the parent is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from dp_engine.errors import DPError
from services import priority
from services.runner.base import JobCancelled, JobDied, Progress, Work, no_progress

log = logging.getLogger(__name__)
NICE = 10
"""Added to a child's nice value: cached answers in the web worker come first."""
WATCH_SECONDS = 1.0
"""How often a child's watchdog checks that its parent is alive."""
POLL_SECONDS = 0.2
"""How often a waiting call checks whether it was cancelled."""

Build = Callable[[Any], Any]


def _die_with_parent(parent: int) -> None:
    """End this process when ``parent`` ends: the kernel's signal, and a watchdog."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)          # PR_SET_PDEATHSIG
    if os.getppid() != parent:                     # it ended before the signal was set
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="runner-watchdog", daemon=True).start()


def _sendable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a ``RuntimeError`` with its words."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any unpicklable error is sent as its text
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _child(conn, config: Any, build: Build, initializer: Callable[[Any], None] | None,
           parent: int) -> None:
    """A child's life: build its services, then run one piece of work after another."""
    _die_with_parent(parent)
    priority.lower(NICE)           # the ledger's write lock is held at the old priority
    try:
        services = build(config)
        if initializer is not None:
            initializer(services)
    except BaseException as exc:  # noqa: BLE001 - the parent logs why no child could start
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):                # the parent closed the pipe: done
            return

        def progress(fraction: float, text: str) -> None:
            conn.send(("progress", float(fraction), str(text)))

        try:
            message = ("ok", fn(services, progress, *args))
            conn.send(message)
        except BaseException as exc:  # noqa: BLE001 - every error goes back to the caller
            if not isinstance(exc, Exception):
                raise
            if not isinstance(exc, DPError):
                log.exception("runner work %s failed", getattr(fn, "__name__", fn))
            conn.send(("error", _sendable(exc)))


class _Child:
    """One child process and the parent's end of its pipe."""

    def __init__(self, process: Any, conn: Any, pid: int) -> None:
        self.process, self.conn, self.pid = process, conn, pid

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.join(5)
        with contextlib.suppress(OSError):
            self.conn.close()


class _Starter:
    """One long-lived thread that starts every child (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="runner-starter", daemon=True).start()

    def _loop(self) -> None:
        while True:
            fn, future = self._queue.get()
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

    def run(self, fn: Callable[[], Any]) -> Any:
        future: Future = Future()
        self._queue.put((fn, future))
        return future.result()


class ProcessRunner:
    """``processes`` lower-priority children per web worker (see the module docstring)."""

    in_process = False

    def __init__(self, config: Any, processes: int, build: Build, *,
                 initializer: Callable[[Any], None] | None = None) -> None:
        self.config = replace(config, runner_processes=0)    # a child has no children
        self.processes = max(1, int(processes))
        self.background_slots = self.processes
        self._build = build
        self._initializer = initializer
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._count = 0
        self._cond = threading.Condition()
        self._starter: _Starter | None = None
        self._closed = False
        self._launching = threading.Lock()
        atexit.register(self.close)      # a worker that exits mid-launch leaves no half child

    def bind(self, services: Any) -> None:
        """Children build their own services; nothing to bind."""

    # -- children ---------------------------------------------------------------------------

    def _start(self) -> _Child:
        ctx = multiprocessing.get_context("spawn")
        mine, theirs = ctx.Pipe()
        process = ctx.Process(target=_child, name="cohort-runner", daemon=True,
                              args=(theirs, self.config, self._build, self._initializer,
                                    os.getpid()))
        with self._launching:            # the parent must not exit while it hands over
            process.start()              # the child's start-up data (it would read EOF)
        theirs.close()
        try:
            first = mine.recv()
        except (EOFError, OSError) as exc:
            process.join(5)
            raise JobDied("the runner's process ended while starting") from exc
        if first[0] != "ready":
            process.join(5)
            raise RuntimeError(f"the runner's process could not start: {first[1]}")
        return _Child(process, mine, first[1])

    def _take(self) -> _Child:
        with self._cond:
            while True:
                if self._closed:
                    raise JobCancelled("the runner is closed")
                while self._idle:
                    child = self._idle.pop()
                    if child.alive():
                        self._busy.add(child)
                        return child
                    self._count -= 1
                if self._count < self.processes:
                    self._count += 1
                    break
                self._cond.wait()
        if self._starter is None:
            self._starter = _Starter()
        try:
            child = self._starter.run(self._start)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._busy.add(child)
        return child

    def _give(self, child: _Child, alive: bool) -> None:
        with self._cond:
            self._busy.discard(child)
            if alive and not self._closed:
                self._idle.append(child)
            else:
                self._count -= 1
                child.kill()
            self._cond.notify()

    def pids(self) -> list[int]:
        """The children's process ids (tests and operators)."""
        with self._cond:
            return [c.pid for c in [*self._idle, *self._busy]]

    # -- work -------------------------------------------------------------------------------

    def call(self, fn: Work, *args: Any, progress: Progress = no_progress,
             cancelled: Callable[[], bool] | None = None, quick: bool = False) -> Any:
        del quick                      # one lane: ``Lanes`` routes quick work to its own pool
        child = self._take()
        alive = False
        try:
            child.conn.send((fn, args))
            while True:
                if cancelled is not None:     # checked between reports, and while none come
                    while cancelled() or not child.conn.poll(POLL_SECONDS):
                        if cancelled():
                            raise JobCancelled("cancelled")
                kind, *rest = child.conn.recv()
                if kind == "progress":
                    progress(*rest)
                    continue
                alive = True
                if kind == "ok":
                    return rest[0]
                raise rest[0]
        except (EOFError, OSError) as exc:
            raise JobDied("the runner's process ended before it answered") from exc
        finally:
            self._give(child, alive and child.alive())

    def warm(self, fn: Work) -> None:
        def run() -> None:
            try:
                self.call(fn)
            except (JobDied, JobCancelled) as exc:   # the worker is stopping (a reload, a
                log.info("runner warm-up stopped: %s", exc)     # restart): not an error
            except Exception:  # noqa: BLE001 - the first real call starts a child anyway
                log.warning("runner warm-up failed", exc_info=True)

        threading.Thread(target=run, name="runner-warm-up", daemon=True).start()

    def close(self) -> None:
        """Kill every child (also at exit: a child being launched gets its start-up data
        first, then dies with its parent)."""
        if self._launching.acquire(timeout=10):
            self._launching.release()
        with self._cond:
            self._closed = True
            children, self._idle = [*self._idle, *self._busy], []
            self._cond.notify_all()
        for child in children:
            child.kill()
