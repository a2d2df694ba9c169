"""8 processes x 200 requests on one budget: never overspent, no row lost, every request answered.

Each process is a fresh interpreter (spawned, nothing inherited). Half of each process's
requests are asked by every process at the same moment (concurrent twins: one stored answer,
charged once); the other half are private. ε = 1/128 and the limit 200/128 are exact in
binary, so exactly 200 charges fit and every figure below is compared exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.ledger.audit import check_invariants
from services.ledger.store import Ledger
from tests.app.test_concurrency_support import (
    CHARGES_THAT_FIT,
    DATASET,
    LIMIT,
    ROLE,
    charge,
    policy,
    request_key,
)
from tests.app.test_ledger import BACKENDS, backend_for, pg_backend

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 8
REQUESTS = 200


def run_burst(url: str, schema: str | None) -> list[dict]:
    """Start PROCESSES clients, release them together, collect every outcome."""
    Ledger(url, policy(), schema=schema).close()  # create the tables once, up front
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.app.test_concurrency_support", "burst", url,
           schema or "", "WORKER", str(REQUESTS)]
    procs = [subprocess.Popen([*cmd[:6], str(w), cmd[7]], cwd=ROOT, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for w in range(PROCESSES)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p in procs:  # every client is connected: start them all at once
            p.stdin.write("go\n")
            p.stdin.flush()
        outcomes = []
        for p in procs:
            out, _ = p.communicate(timeout=600)
            assert p.returncode == 0
            outcomes.extend(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outcomes


def check_ledger_consistent(ledger: Ledger) -> dict:
    """Budget, dataset loss and rows agree; never over the limit; the ledger's invariants
    (services/ledger/audit.py) hold. Returns the served rows by request key."""
    assert check_invariants(ledger) == []
    releases = ledger.releases(limit=None)
    rows = {r.query_key.split("|as=")[0]: r for r in releases}
    assert len(rows) == len(releases)  # one row per key
    spent = ledger.budget(role=ROLE, dataset_id=DATASET).spent
    assert spent == sum(r.epsilon for r in releases) == ledger.dataset_loss(DATASET)
    assert len(ledger.internal_releases(limit=None)) == len(rows)  # one tier per answer
    assert spent <= LIMIT
    return rows


def check_outcomes(outcomes: list[dict], ledger: Ledger, *, complete: bool = True) -> dict:
    """Every answer given is the stored one; refusals record nothing and say spent/left.

    ``complete``: every request got an answer or a refusal, and the budget is used up.
    """
    rows = check_ledger_consistent(ledger)
    kinds = defaultdict(list)
    for o in outcomes:
        kinds[o["kind"]].append(o)
    assert set(kinds) <= {"new", "cached", "refused"}
    for o in kinds["new"] + kinds["cached"]:  # no lost row
        assert rows[o["key"]].id == o["id"] and rows[o["key"]].answer == o["answer"]
    for o in kinds["refused"]:
        assert o["key"] not in rows
        assert "spent " in o["message"] and " left" in o["message"]
    if complete:
        assert len(kinds["new"]) == CHARGES_THAT_FIT == len(rows)
        assert {o["key"] for o in kinds["new"]} == set(rows)
        assert all(f"spent {LIMIT:.4g} of {LIMIT:.4g}, 0 left" in o["message"]
                   for o in kinds["refused"])
    return kinds


def test_eight_processes_on_sqlite(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    outcomes = run_burst(url, None)
    assert len(outcomes) == PROCESSES * REQUESTS
    ledger = Ledger(url, policy())
    kinds = check_outcomes(outcomes, ledger)
    ledger.close()
    assert any(o["key"].startswith("shared-") for o in kinds["cached"])  # twins did race


@pytest.fixture
def pg_database():
    yield from pg_backend()


@pytest.mark.postgres
def test_eight_processes_on_postgresql(pg_database):
    url, schema = pg_database
    outcomes = run_burst(url, schema)
    assert len(outcomes) == PROCESSES * REQUESTS
    ledger = Ledger(url, policy(), schema=schema)
    kinds = check_outcomes(outcomes, ledger)
    ledger.close()
    assert any(o["key"].startswith("shared-") for o in kinds["cached"])


@pytest.fixture(params=BACKENDS)
def database(request, tmp_path):
    yield from backend_for(request.param, tmp_path)


def test_threads_sharing_one_ledger_object(database):
    """A threaded server (Dash's own) shares one Ledger between threads: same guarantees."""
    url, schema = database
    ledger = Ledger(url, policy(), schema=schema)
    threads, requests = 8, 50  # 25 shared + 8 x 25 private keys: more than the 200 that fit

    def client(worker: int) -> list[dict]:
        return [charge(ledger, request_key(worker, j), f"user-{worker}") for j in range(requests)]

    with ThreadPoolExecutor(threads) as pool:
        outcomes = [o for chunk in pool.map(client, range(threads)) for o in chunk]
    assert len(outcomes) == threads * requests
    check_outcomes(outcomes, ledger)
    ledger.close()
