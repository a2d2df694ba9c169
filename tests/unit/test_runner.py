"""The runner's process pool on its own: work runs in a lower-priority child and reports
progress, errors come back as they were raised, a cancel kills the child running it (the next
call gets a new one), and inline work behaves the same in the caller's process."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import pytest

from dp_engine.errors import DPError
from services.runner import InlineRunner, JobCancelled, ProcessRunner
from services.runner.pool import NICE


@dataclass(frozen=True)
class Config:
    runner_processes: int = 0


def build(config: Config) -> dict:
    return {"built in": os.getpid()}


def where(services, progress, x):
    progress(0.5, "half way")
    return services["built in"], os.getpid(), os.getpriority(os.PRIO_PROCESS, 0), x * 2


def refuse(services, progress):
    raise DPError("Over budget. Nothing was charged.")


class Unpicklable(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")


def odd(services, progress):
    raise Unpicklable(1, 2)


def forever(services, progress):
    while True:
        progress(0.1, "working")
        time.sleep(0.05)


@pytest.fixture
def pool():
    runner = ProcessRunner(Config(1), 1, build)
    yield runner
    runner.close()


def test_work_runs_in_a_lower_priority_child_and_reports_progress(pool):
    heard = []
    built, pid, nice, doubled = pool.call(where, 21, progress=lambda f, t: heard.append((f, t)))
    assert doubled == 42 and heard == [(0.5, "half way")]
    assert pid == built != os.getpid() and pool.pids() == [pid]
    assert nice == min(os.getpriority(os.PRIO_PROCESS, 0) + NICE, 19)
    assert pool.call(where, 1)[1] == pid                      # the same child, kept


def test_errors_come_back_as_raised(pool):
    with pytest.raises(DPError, match="Nothing was charged"):
        pool.call(refuse)
    with pytest.raises(RuntimeError, match="Unpicklable: 1/2"):
        pool.call(odd)
    assert len(pool.pids()) == 1                              # the child survives both


def test_a_cancel_kills_the_child_and_the_next_call_gets_a_new_one(pool):
    first = pool.call(where, 1)[1]
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(JobCancelled):
        pool.call(forever, cancelled=stop.is_set)
    assert first not in pool.pids()
    assert pool.call(where, 1)[1] != first


def test_inline_work_is_the_same_in_the_callers_process():
    runner = InlineRunner()
    runner.bind({"built in": os.getpid()})
    assert runner.call(where, 2)[:2] == (os.getpid(), os.getpid())
    with pytest.raises(DPError):
        runner.call(refuse)
    with pytest.raises(JobCancelled):
        runner.call(forever, cancelled=lambda: True)
