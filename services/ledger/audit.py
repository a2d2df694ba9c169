"""The ledger's books, checked: what every budget and dataset total must equal.

- per (role, dataset): the budget's spend this period equals the sum of the served releases'
  charges (DP rows only) since the period started;
- per dataset: the dataset-level loss equals the sum of its tier store's DP losses, and the
  paper-mode lower bound the sum of its non-DP rows;
- as DESIGN.md defines the loss: a tier drawn from the data adds its ε, a tier refined from a
  less noisy stored tier of the same query adds nothing, so a query's tiers add the ε of each
  independent draw (nested: the least noisy tier once; box plots: every tier drawn).
Rows migrated from older ledgers (``legacy:`` keys) are summed but not checked for structure.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from services.ledger import db as ledger_db
from services.ledger.db import aware
from services.ledger.migrate import LEGACY_PREFIX
from services.ledger.models import budgets, datasets, releases, tiers

if TYPE_CHECKING:
    from services.ledger.store import Ledger


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check_invariants(ledger: Ledger) -> list[str]:
    """Every way the books fail to add up (an empty list: they add up)."""
    problems: list[str] = []
    r, t = releases.c, tiers.c
    at = ledger_db.now()
    with ledger.db.tx(write=False) as conn:
        for b in conn.execute(select(budgets)).mappings().all():
            start = aware(b["period_start"])
            served = conn.execute(select(func.coalesce(func.sum(r.epsilon), 0.0)).where(
                r.role == b["role"], r.dataset_id == b["dataset_id"], r.dp.is_(True),
                r.created_at >= b["period_start"])).scalar_one()
            current = ledger.policy.period_start(aware(b["first_charge_at"]), at) <= start
            if current and not _close(float(b["spent"]), float(served)):
                problems.append(f"budget {b['role']}/{b['dataset_id']}: spent {b['spent']!r} "
                                f"but its served charges sum to {served!r}")
        rows = conn.execute(select(t.dataset_id, t.dataset_version, t.query_key, t.tier,
                                   t.epsilon, t.dataset_loss, t.refined_from, t.dp)).all()
        totals = {d.dataset_id: (float(d.loss), float(d.unsound_loss))
                  for d in conn.execute(select(datasets))}
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    by_query: dict[tuple[str, str], dict[int, tuple]] = defaultdict(dict)
    for row in rows:
        sums[row.dataset_id][0 if row.dp else 1] += float(row.dataset_loss)
        if not row.query_key.startswith(LEGACY_PREFIX):
            by_query[(row.dataset_version, row.query_key)][int(row.tier)] = row
    for ds in set(sums) | set(totals):
        loss, unsound = totals.get(ds, (0.0, 0.0))
        if not (_close(loss, sums[ds][0]) and _close(unsound, sums[ds][1])):
            problems.append(f"dataset {ds}: loss {loss!r} / paper {unsound!r} but its tier "
                            f"store sums to {sums[ds][0]!r} / {sums[ds][1]!r}")
    for (version, query), tiers_of in by_query.items():
        for tier, row in tiers_of.items():
            where = f"tier {tier} of {query!r} ({version})"
            if row.refined_from is None:
                if not _close(float(row.dataset_loss), float(row.epsilon)):
                    problems.append(f"{where}: drawn from the data but adds "
                                    f"{row.dataset_loss!r}, not its ε {row.epsilon!r}")
            elif row.dataset_loss != 0.0 or row.refined_from not in tiers_of \
                    or row.refined_from >= tier:
                problems.append(f"{where}: refined from tier {row.refined_from} but adds "
                                f"{row.dataset_loss!r} or has no less noisy parent")
    return problems
