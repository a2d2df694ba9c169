"""The ledger behind two gunicorn workers: concurrent HTTP bursts, a worker killed mid-burst,
and a full restart — budgets never exceeded, no row lost, the cache intact and shared.

The served app is ``tests.app.test_concurrency_support:create_wsgi()`` (one ``POST /charge``
route over the real Ledger), bound to 127.0.0.1 on a free port and stopped after each test.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import pytest

from services.ledger.store import Ledger
from tests.app.gunicorn_app import stop_gunicorn
from tests.app.test_concurrency import check_ledger_consistent, check_outcomes
from tests.app.test_concurrency_support import DATASET, ROLE, policy, request_key
from tests.app.test_ledger import BACKENDS, backend_for, pg_backend

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or \
    shutil.which("gunicorn")
pytestmark = pytest.mark.skipif(GUNICORN is None, reason="gunicorn is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gunicorn:
    """Two sync workers serving the ledger app on 127.0.0.1; always stopped by the test."""

    def __init__(self, url: str, schema: str | None, log: Path) -> None:
        self.url, self.schema, self.log = url, schema, log
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> None:
        self.port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COHORT_TEST_LEDGER_URL": self.url,
               "COHORT_TEST_LEDGER_SCHEMA": self.schema or ""}
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [GUNICORN, "-w", "2", "-b", f"127.0.0.1:{self.port}", "--timeout", "300",
                 "--graceful-timeout", "10", "--log-level", "warning",
                 "tests.app.test_concurrency_support:create_wsgi()"],
                cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
        for _ in range(600):  # readiness: bounded number of polls, not a timing assertion
            if self.proc.poll() is not None:
                raise AssertionError(f"gunicorn exited: {self.log.read_text()[-2000:]}")
            try:
                self.request("GET", "/health")
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"gunicorn never answered: {self.log.read_text()[-2000:]}")

    def request(self, method: str, path: str) -> dict:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            conn.request(method, path)
            res = conn.getresponse()
            body = res.read()
            assert res.status == 200, (res.status, body[:500])
            return json.loads(body)
        finally:
            conn.close()

    def charge(self, key: str, user: str) -> dict:
        return self.request("POST", f"/charge?key={quote(key)}&user={quote(user)}")

    def stop(self) -> None:
        stop_gunicorn(self.proc)


@pytest.fixture
def pg_database():
    yield from pg_backend()


@pytest.fixture(params=BACKENDS)
def database(request, tmp_path):
    yield from backend_for(request.param, tmp_path)


def _serve(database, log: Path):
    url, schema = database
    Ledger(url, policy(), schema=schema).close()  # tables exist before the workers race
    srv = Gunicorn(url, schema, log)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def server(database, tmp_path):
    yield from _serve(database, tmp_path / "gunicorn.log")


@pytest.fixture
def pg_server(pg_database, tmp_path):
    yield from _serve(pg_database, tmp_path / "gunicorn.log")


def burst(srv: Gunicorn, clients: int, requests: int, on_each=None) -> list[dict]:
    """``clients`` threads, each ``requests`` sequential POSTs; transport errors recorded."""

    def client(worker: int) -> list[dict]:
        out = []
        for j in range(requests):
            key = request_key(worker, j)
            try:
                out.append(srv.charge(key, f"user-{worker}"))
            except (OSError, http.client.HTTPException) as exc:
                out.append({"key": key, "kind": "error", "error": repr(exc)})
            if on_each is not None:
                on_each(out[-1])
        return out

    with ThreadPoolExecutor(clients) as pool:
        return [o for chunk in pool.map(client, range(clients)) for o in chunk]


@pytest.mark.postgres
def test_two_gunicorn_workers_on_postgresql(pg_server, pg_database):
    server = pg_server
    server.start()
    outcomes = burst(server, clients=8, requests=200)
    assert len(outcomes) == 1600 and not [o for o in outcomes if o["kind"] == "error"]
    assert len({o["pid"] for o in outcomes}) == 2  # both workers served and shared one ledger
    ledger = Ledger(pg_database[0], policy(), schema=pg_database[1])
    kinds = check_outcomes(outcomes, ledger)
    ledger.close()
    assert any(o["key"].startswith("shared-") for o in kinds["cached"])


def test_worker_killed_mid_burst_then_restart_keeps_budget_and_cache(server, database):
    url, schema = database
    server.start()
    master = server.proc.pid
    lock, done, killed = threading.Lock(), [0], []

    def kill_one_worker_midway(outcome: dict) -> None:
        with lock:
            done[0] += 1
            if done[0] == 60 and "pid" in outcome and outcome["pid"] != master:
                os.kill(outcome["pid"], signal.SIGKILL)
                killed.append(outcome["pid"])

    outcomes = burst(server, clients=4, requests=60, on_each=kill_one_worker_midway)
    assert killed and len(outcomes) == 240
    answered = [o for o in outcomes if o["kind"] != "error"]
    assert {o["pid"] for o in answered} - set(killed)  # a worker took over after the kill
    server.stop()

    ledger = Ledger(url, policy(), schema=schema)
    check_outcomes(answered, ledger, complete=False)  # every answer given is stored, no overspend
    before = ledger.budget(role=ROLE, dataset_id=DATASET).spent
    rows_before = {k: (r.id, r.answer) for k, r in check_ledger_consistent(ledger).items()}
    ledger.close()

    server.start()  # a fresh master and workers on the same database
    given = {o["key"]: o for o in answered if o["kind"] in ("new", "cached")}
    for key, o in given.items():
        again = server.charge(key, "after-restart")
        assert again["kind"] == "cached" and again["id"] == o["id"]
        assert again["answer"] == o["answer"]
    fresh = server.charge("after-restart-fresh", "after-restart")
    server.stop()

    ledger = Ledger(url, policy(), schema=schema)
    rows = check_ledger_consistent(ledger)
    after = ledger.budget(role=ROLE, dataset_id=DATASET).spent
    ledger.close()
    assert {k: (r.id, r.answer) for k, r in rows.items() if k in rows_before} == rows_before
    assert after == before + (rows[fresh["key"]].epsilon if fresh["kind"] == "new" else 0.0)
