"""Budgets as data: the owner's settings kept in the ledger, in force at once on every worker.

The Ledger page writes one row per change (who, when, which dataset, which setting, the new
value); the newest row per (dataset, setting) is in force, a dataset's own row over the row
for every dataset ("*"), and both over the environment's defaults (``BudgetPolicy``). Every
transaction of the door reads them together with the spend it checks, so a change binds the
very next request on any worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, select

from services.identity.roles import Role
from services.ledger.db import aware
from services.ledger.models import policy as _POLICY

EVERY_DATASET = "*"
KEYS = tuple([f"budget:{r.value}" for r in Role] + [f"user_limit:{r.value}" for r in Role]
             + ["dataset_cap"])


@dataclass(frozen=True)
class PolicyChange:
    """One change the owner made, as recorded."""

    at: datetime
    user: str
    dataset_id: str
    key: str
    value: float | None


def check_setting(key: str, value: float | None) -> float | None:
    """A setting as stored, or ValueError naming what is wrong (a clinician can act on it)."""
    if key not in KEYS:
        raise ValueError(f"Unknown setting '{key}'.")
    if value is None:
        return None
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError("A budget or cap is a number of ε, 0 or more (leave it empty for "
                         "no limit).")
    return number


def overrides(conn: Connection, dataset_id: str) -> dict[str, float | None]:
    """The settings in force for ``dataset_id`` (its own over every dataset's)."""
    p = _POLICY.c
    rows = conn.execute(select(p.dataset_id, p.key, p.value).where(
        p.dataset_id.in_([EVERY_DATASET, str(dataset_id)])).order_by(p.id)).all()
    general = {k: v for d, k, v in rows if d == EVERY_DATASET}
    own = {k: v for d, k, v in rows if d != EVERY_DATASET}
    return {**general, **own}


def record(conn: Connection, *, dataset_id: str, key: str, value: float | None, user: str,
           at: datetime) -> None:
    """Append one change (validated)."""
    conn.execute(_POLICY.insert().values(
        changed_at=at, user_name=str(user)[:200], dataset_id=str(dataset_id)[:200],
        key=key, value=check_setting(key, value)))


def history(conn: Connection, limit: int = 200) -> list[PolicyChange]:
    """The newest changes first."""
    p = _POLICY.c
    rows = conn.execute(select(_POLICY).order_by(p.id.desc()).limit(int(limit))).mappings()
    return [PolicyChange(aware(r["changed_at"]), r["user_name"], r["dataset_id"], r["key"],
                         None if r["value"] is None else float(r["value"])) for r in rows]
