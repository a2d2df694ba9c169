"""Helpers run in OTHER processes by the concurrency tests (this module holds no test).

- ``python -m tests.app.test_concurrency_support burst URL SCHEMA WORKER N``: one client
  process. It opens the ledger, prints ``ready``, waits for ``go`` on stdin (so all processes
  start together), makes N charges and prints the outcomes as one JSON line.
- ``create_wsgi()``: a tiny Flask app over the ledger for gunicorn (``POST /charge?key=``),
  configured from the environment; it imports nothing heavier than the ledger so workers
  start fast.

Kept import-light on purpose: no pytest, numpy or pandas, because each spawned interpreter
pays for its imports on a shared 2-core machine.
"""

from __future__ import annotations

import json
import os
import sys

from dp_engine.errors import BudgetExceededError
from services.identity.roles import Role
from services.ledger.policy import BudgetPolicy
from services.ledger.store import Ledger

EPS = 1 / 128                # exact in binary, so sums of charges are exact
CHARGES_THAT_FIT = 200
LIMIT = CHARGES_THAT_FIT * EPS
DATASET = "cohort"
ROLE = Role.COLLABORATOR


def policy() -> BudgetPolicy:
    return BudgetPolicy({ROLE: LIMIT})


def request_key(worker: int, j: int) -> str:
    """Even requests: the same key in every process at once (twins); odd: private keys."""
    return f"shared-{j}" if j % 2 == 0 else f"private-{worker}-{j}"


def charge(ledger: Ledger, key: str, who: str) -> dict:
    """One request; the outcome as plain JSON: kind new / cached / refused."""
    try:
        rel = ledger.charge_and_record(
            user=who, role=ROLE, dataset_id=DATASET, dataset_version="v1", query_key=key,
            tier=ROLE.noise_factor, mechanism="laplace", epsilon=EPS,
            answer={"computed_by": who, "key": key}, dataset_loss=EPS)
    except BudgetExceededError as exc:
        return {"key": key, "kind": "refused", "message": str(exc)}
    return {"key": key, "kind": "cached" if rel.cached else "new", "id": rel.id,
            "answer": rel.answer}


def _burst(url: str, schema: str, worker: int, n: int) -> None:
    ledger = Ledger(url, policy(), schema=schema or None)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go signal")
    out = [charge(ledger, request_key(worker, j), f"user-{worker}") for j in range(n)]
    ledger.close()
    print(json.dumps(out), flush=True)


def create_wsgi():
    """Flask app for gunicorn: COHORT_TEST_LEDGER_URL, COHORT_TEST_LEDGER_SCHEMA."""
    import flask

    ledger = Ledger(os.environ["COHORT_TEST_LEDGER_URL"], policy(),
                    schema=os.environ.get("COHORT_TEST_LEDGER_SCHEMA") or None)
    app = flask.Flask("ledger-under-test")

    @app.post("/charge")
    def _charge():
        key = flask.request.args["key"]
        out = charge(ledger, key, flask.request.args.get("user", "http"))
        return {**out, "pid": os.getpid()}

    @app.get("/health")
    def _health():
        return {"pid": os.getpid()}

    return app


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[1] != "burst":
        raise SystemExit(__doc__)
    _burst(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
