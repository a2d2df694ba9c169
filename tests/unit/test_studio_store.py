"""The studio's run store and job runner: records bound to their user by an unguessable token,
each user's last few kept (older ones and their tables deleted), a job that stopped updating
shown as interrupted, failures as messages (a DPError's own, a generic one otherwise)."""

from __future__ import annotations

import json
import os
import time

import pytest

from dp_engine.errors import DPError
from services.studio import jobs
from services.studio.store import INTERRUPTED, KEEP_PER_USER, STALE_SECONDS, RunStore


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


def test_a_job_that_stopped_updating_is_shown_as_interrupted(store):
    token = store.new("ann", "synthetic")
    record = store._read("ann", token)
    store._write(store._dir("ann") / f"{token}.json",
                 json.dumps({**record, "updated": time.time() - STALE_SECONDS - 1,
                                           "state": "running"}).encode())
    assert store.get("ann", token)["state"] == "error"
    assert store.get("ann", token)["text"] == INTERRUPTED


@pytest.mark.parametrize(("error", "text"), [(DPError("Over budget."), "Over budget."),
                                             (RuntimeError("boom"), jobs.FAILED)])
def test_a_failed_job_is_a_message(store, error, text):
    def work(progress):
        progress(0.5, "half way")
        raise error

    token = store.new("ann", "record")
    jobs.run_job(store, "ann", token, work)
    record = store.get("ann", token)
    assert record["state"] == "error" and record["text"] == text and "boom" not in record["text"]


def test_a_job_runs_in_the_background_and_reports_its_result(store):
    token = jobs.submit(store, "ann", "record", lambda progress: ({"run_id": "r"}, "c\n1\n"))
    for _ in range(200):
        if store.get("ann", token)["state"] == "done":
            break
        time.sleep(0.02)
    assert store.get("ann", token)["result"] == {"run_id": "r"} and store.csv("ann", token)
