"""Helpers run in OTHER processes by the concurrency tests (this module holds no test), and
toy plans the ledger tests share.

- ``python -m tests.app.test_concurrency_support burst URL SCHEMA WORKER N``: one client
  process. It opens the ledger, prints ``ready``, waits for ``go`` on stdin (so all processes
  start together), makes N requests through the ledger's door and prints the outcomes as one
  JSON line.
- ``create_wsgi()``: a tiny Flask app over the ledger for gunicorn (``POST /charge?key=``),
  configured from the environment; it imports nothing heavier than the ledger so workers
  start fast.

Kept import-light on purpose (no pytest, numpy or pandas: the toy releases are plain objects
with the few members the ledger reads), because each spawned interpreter pays for its imports
on a shared 2-core machine.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from dp_engine.errors import BudgetExceededError
from services.identity.roles import Role
from services.ledger.plan import ReleaseKey, ReleasePlan
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


def toy_plan(key: str, *, role: Role = ROLE, eps: float | dict[int, float] = EPS,
             dataset: str = DATASET, version: str = "v1", tier: int | None = None,
             nestable: bool = False, dp: bool = True) -> ReleasePlan:
    """A plan with no internal input: ε per tier given (one number: every tier)."""
    tier = role.noise_factor if tier is None else tier
    per_tier = eps if isinstance(eps, dict) else dict.fromkeys(range(3), eps)
    return ReleasePlan(ReleaseKey(dataset, version, key, tier, role), per_tier, nestable,
                       "toy mechanism", dp=dp, join=toy_join if nestable else None)


@dataclass(frozen=True)
class ToyRelease:
    """Stands in for a dp_engine Release: what the ledger reads of one (value, ε, mechanism)."""

    value: float
    epsilon: float
    mechanism: str = "toy mechanism"

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": "toy", "value": self.value, "epsilon": self.epsilon,
                "mechanism": self.mechanism, "sensitivity": 1.0}


def toy_release(eps: Any, _rng: Any = None, value: float = 41.5) -> ToyRelease:
    return ToyRelease(value, float(eps or 0.0))


def toy_join(stored: Any, tier: int, eps: Any, compute: Any, rng: Any) -> ToyRelease:
    """A toy tier joined to the stored ones: the value of the nearest stored tier (refined,
    sharpened or bridged), else a fresh draw."""
    if not stored:
        return compute(max(eps, default=0.0), rng)
    nearest = min(stored, key=lambda t: (abs(t - tier), t))
    return ToyRelease(stored[nearest].value, float(max(eps, default=0.0)),
                      "toy mechanism (joined)")


def answer(payload: dict[str, Any]):
    """A publish callable that gives ``payload`` as the public answer."""
    return lambda _plan, _rel: payload


def charge(ledger: Ledger, key: str, who: str) -> dict:
    """One request through the door; the outcome as plain JSON: kind new / cached / refused."""
    try:
        served = ledger.release(toy_plan(key), toy_release,
                                answer({"computed_by": who, "key": key}), user=who)
    except BudgetExceededError as exc:
        return {"key": key, "kind": "refused", "message": str(exc)}
    return {"key": key, "kind": "cached" if served.cached else "new",
            "id": served.release_id, "answer": dict(served.answer)}


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
