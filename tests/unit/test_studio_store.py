"""The studio's run store and the runner's background jobs: records bound to their user by an
unguessable token, each user's last few kept (older ones and their tables deleted), a job whose
heartbeat stopped shown as failed, failures as messages (a DPError's own, a generic one
otherwise), a cancel asked on another worker reaching the job."""

from __future__ import annotations

import json
import os
import time

import pytest

from dp_engine.errors import DPError
from services.runner import InlineRunner, jobs
from services.studio.store import KEEP_PER_USER, RunStore


@pytest.fixture
def store(tmp_path) -> RunStore:
    return RunStore(tmp_path)


def test_a_record_is_its_users_only(store, tmp_path):
    token = store.new("ann", "synthetic")
    store.finish("ann", token, {"run_id": "r1"}, "a,b\n1,2\n")
    assert store.get("ann", token)["state"] == "done" and store.csv("ann", token) == "a,b\n1,2\n"
    assert store.get("bob", token) is None and store.csv("bob", token) is None
    assert RunStore(tmp_path).get("ann", token)["result"] == {"run_id": "r1"}  # another worker
    for forged in ("../" + token, token[:-1], token.upper(), None, 7, ["x"]):
        assert store.get("ann", forged) is None and store.csv("ann", forged) is None


def test_each_user_keeps_the_last_few(store):
    tokens = []
    for n in range(KEEP_PER_USER + 2):
        tokens.append(store.new("ann", "record"))
        store.finish("ann", tokens[-1], {"n": n}, "x\n")
        path = store._dir("ann") / f"{tokens[-1]}.json"
        os.utime(path, (n, n))                        # distinct ages, oldest first
    other = store.new("bob", "record")
    kept = [t for t in tokens if store.get("ann", t) is not None]
    assert kept == tokens[-KEEP_PER_USER:]
    assert store.get("ann", tokens[0]) is None and store.csv("ann", tokens[0]) is None
    assert store.get("bob", other) is not None        # another user's records are untouched


def _age(store: RunStore, token: str, seconds: float) -> None:
    record = store._read("ann", token)
    store._write(store._dir("ann") / f"{token}.json",
                 json.dumps({**record, "updated": time.time() - seconds,
                             "state": "running"}).encode())


def test_a_job_whose_heartbeat_stopped_is_shown_as_failed(store):
    token = store.new("ann", "synthetic")
    _age(store, token, jobs.STALE_BEATS * jobs.HEARTBEAT - 5)
    assert store.get("ann", token)["state"] == "running"       # a beat late is not dead
    _age(store, token, jobs.STALE_BEATS * jobs.HEARTBEAT + 1)
    record = store.get("ann", token)
    assert record["state"] == "error" and record["failure"] == jobs.DIED


def _jobs() -> jobs.Jobs:
    runner = InlineRunner()
    runner.bind("the services")
    return jobs.Jobs(runner)


def _until(store: RunStore, token: str, done=lambda r: r["state"] in ("done", "error")) -> dict:
    for _ in range(1000):
        record = store.get("ann", token)
        if done(record):
            return record
        time.sleep(0.01)
    raise AssertionError(f"job still {store.get('ann', token)}")


def _raise(error):
    def work(services, progress):
        assert services == "the services"
        progress(0.5, "half way")
        raise error
    return work


@pytest.mark.parametrize(("error", "text"), [(DPError("Over budget."), "Over budget."),
                                             (RuntimeError("boom"), jobs.FAILED)])
def test_a_failed_job_is_a_message(store, error, text):
    token = _jobs().submit(store, "ann", "record", _raise(error))
    record = _until(store, token)
    assert record["state"] == "error" and record["text"] == text and "boom" not in record["text"]


def test_a_job_runs_in_the_background_and_reports_its_result(store):
    token = _jobs().submit(store, "ann", "record",
                           lambda services, progress: ({"run_id": "r"}, "c\n1\n"), mark=3)
    record = _until(store, token)
    assert record["result"] == {"run_id": "r"} and store.csv("ann", token)
    assert record["mark"] == 3


def test_a_cancel_asked_through_another_worker_stops_the_job(store, tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "HEARTBEAT", 0.05)
    started = []

    def work(services, progress):
        started.append(True)
        while True:                       # stops at a report once the cancel arrived
            progress(0.5, "working")
            time.sleep(0.01)

    token = _jobs().submit(store, "ann", "record", work)
    _until(store, token, lambda r: bool(started))
    assert RunStore(tmp_path).request_cancel("ann", token)     # another worker's store
    assert not RunStore(tmp_path).request_cancel("bob", token)
    record = _until(store, token)
    assert record["state"] == "error" and record["failure"] == jobs.CANCELLED
