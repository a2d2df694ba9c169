"""The ledger page's reports: filters, totals per user and dataset, the CSV export."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, case, func, select

from services.csv_safe import rows_csv
from services.ledger.db import aware
from services.ledger.door import dumps
from services.ledger.models import deliveries as _DELIVERIES
from services.ledger.models import releases as _RELEASES
from services.ledger.records import StoredRelease

if TYPE_CHECKING:
    import pandas as pd

TOTAL_COLUMNS = ["user", "dataset_id", "releases", "epsilon", "dataset_loss", "unsound_epsilon",
                 "cache_hits", "first_release", "last_release"]
CSV_COLUMNS = ["id", "created_at", "user", "role", "dataset_id", "dataset_version", "query_key",
               "tier", "mechanism", "dp", "epsilon", "dataset_loss", "answer"]


def filtered(stmt, user: str | None, dataset_id: str | None):
    """Restrict a releases query to one user and/or dataset (empty = no filter)."""
    if user:
        stmt = stmt.where(_RELEASES.c.user_name == user)
    if dataset_id:
        stmt = stmt.where(_RELEASES.c.dataset_id == dataset_id)
    return stmt


def totals(conn: Connection) -> pd.DataFrame:
    """Per user and dataset: releases paid for, ε charged and dataset-level ε (DP releases),
    paper-mode effective ε (lower bounds, not DP), cache hits, first and last activity."""
    import pandas as pd  # only the ledger page needs it; workers start faster without

    r, d = _RELEASES.c, _DELIVERIES.c
    sound = r.dp.is_(True)
    paid = (select(r.user_name.label("user"), r.dataset_id,
                   func.count().label("releases"),
                   func.sum(case((sound, r.epsilon), else_=0.0)).label("epsilon"),
                   func.sum(case((sound, r.dataset_loss), else_=0.0)).label("dataset_loss"),
                   func.sum(case((sound, 0.0), else_=r.epsilon)).label("unsound_epsilon"),
                   func.min(r.created_at).label("first_release"),
                   func.max(r.created_at).label("last_release"))
            .group_by(r.user_name, r.dataset_id))
    reused = (select(d.user_name.label("user"), r.dataset_id,
                     func.count().label("cache_hits"),
                     func.min(d.delivered_at).label("first_hit"),
                     func.max(d.delivered_at).label("last_hit"))
              .join_from(_DELIVERIES, _RELEASES, d.release_id == r.id)
              .group_by(d.user_name, r.dataset_id))
    a = pd.DataFrame([dict(m) for m in conn.execute(paid).mappings()],
                     columns=["user", "dataset_id", "releases", "epsilon", "dataset_loss",
                              "unsound_epsilon", "first_release", "last_release"])
    b = pd.DataFrame([dict(m) for m in conn.execute(reused).mappings()],
                     columns=["user", "dataset_id", "cache_hits", "first_hit", "last_hit"])
    out = a.merge(b, on=["user", "dataset_id"], how="outer")
    for col in ("releases", "cache_hits"):
        out[col] = out[col].fillna(0).astype(int)
    for col in ("epsilon", "dataset_loss", "unsound_epsilon"):
        out[col] = out[col].fillna(0.0).astype(float)
    first = [min(aware(t) for t in pair if not pd.isna(t))
             for pair in zip(out["first_release"], out["first_hit"], strict=True)]
    last = [max(aware(t) for t in pair if not pd.isna(t))
            for pair in zip(out["last_release"], out["last_hit"], strict=True)]
    out = out.assign(first_release=first, last_release=last)
    return out[TOTAL_COLUMNS].sort_values(["user", "dataset_id"]).reset_index(drop=True)


def csv_text(rows: list[StoredRelease]) -> str:
    """Served releases as CSV (``dp`` false: paper mode, ``epsilon`` is a lower bound)."""
    return rows_csv(CSV_COLUMNS, ([
        rel.id, rel.created_at.isoformat(), rel.user, rel.role, rel.dataset_id,
        rel.dataset_version, rel.query_key, rel.tier, rel.mechanism,
        "yes" if rel.dp else "no (lower bound)", rel.epsilon, rel.dataset_loss,
        dumps(rel.answer)] for rel in rows))
