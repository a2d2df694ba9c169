"""The ledger's books, checked: what every budget and dataset total must equal.

- per (role, dataset): the budget's spend this period equals the sum of the served releases'
  charges (DP rows only) since the period started;
- per dataset: its loss equals the sum of its tier store's DP losses, and the paper-mode
  lower bound the sum of its non-DP rows;
- per query (services/ledger/chain.py): its tiers' losses add up to the largest ε of any group
  of any disclosed tier (0 while only the owner has seen it); a tier never disclosed adds
  nothing; a calibration release adds its ε;
- every DP answer served to a role other than the owner stands on a disclosed tier: no answer
  reaches another role without counting towards the dataset's loss.
Rows migrated from older ledgers (``legacy:`` keys) are summed but not checked for structure.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from services.identity.roles import Role
from services.ledger import db as ledger_db
from services.ledger.chain import INDEPENDENT
from services.ledger.db import aware
from services.ledger.migrate import LEGACY_PREFIX, MIGRATED
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
                                   t.epsilon, t.dataset_loss, t.refined_from, t.dp,
                                   t.epsilons_json, t.disclosed_at, t.drawn)).all()
        served_elsewhere = [
            (v, q.rpartition("|as=")[0], int(tr)) for v, q, tr in conn.execute(
                select(r.dataset_version, r.query_key, r.tier).where(
                    r.role != Role.OWNER.value, r.dp.is_(True)))
            if "|as=" in q]
        totals = {d.dataset_id: (float(d.loss), float(d.unsound_loss))
                  for d in conn.execute(select(datasets))}
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    by_query: dict[tuple[str, str], dict[int, tuple]] = defaultdict(dict)
    for row in rows:
        sums[row.dataset_id][0 if row.dp else 1] += float(row.dataset_loss)
        if not row.query_key.startswith(LEGACY_PREFIX):
            by_query[(row.dataset_version, row.query_key)][int(row.tier)] = row
    by_query = {k: v for k, v in by_query.items()      # drawn under the rules of then
                if not any(r.drawn == MIGRATED for r in v.values())}
    for ds in set(sums) | set(totals):
        loss, unsound = totals.get(ds, (0.0, 0.0))
        if not (_close(loss, sums[ds][0]) and _close(unsound, sums[ds][1])):
            problems.append(f"dataset {ds}: loss {loss!r} / paper {unsound!r} but its tier "
                            f"store sums to {sums[ds][0]!r} / {sums[ds][1]!r}")
    for (version, query), tiers_of in by_query.items():
        where = f"{query!r} ({version})"
        added = math.fsum(float(r.dataset_loss) for r in tiers_of.values() if r.dp)
        disclosed = [r for r in tiers_of.values() if r.dp and r.disclosed_at is not None]
        independent = any(r.drawn == INDEPENDENT for r in tiers_of.values())
        per_tier = [max(_eps(r)) for r in disclosed]
        want = math.fsum(per_tier) if independent else max(per_tier, default=0.0)
        if not _close(added, want):
            problems.append(f"{where}: its tiers add {added!r} to the loss, but its largest "
                            f"disclosed group ε is {want!r}")
        for tier, row in tiers_of.items():
            if row.dp and row.disclosed_at is None and float(row.dataset_loss) != 0.0:
                problems.append(f"tier {tier} of {where}: never disclosed but adds "
                                f"{row.dataset_loss!r}")
    for version, query, tier in served_elsewhere:
        row = by_query.get((version, query), {}).get(tier)
        if row is not None and row.dp and row.disclosed_at is None:
            problems.append(f"tier {tier} of {query!r} ({version}): served to a role other "
                            "than the owner but not disclosed")
    return problems


def _eps(row) -> list[float]:
    """A tier row's ε per group (its single ε for rows that predate per-group records)."""
    if row.epsilons_json:
        values = [float(v) for v in json.loads(row.epsilons_json)]
        return values or [0.0]
    return [float(row.epsilon)]
