"""The door's statements, built once per dialect and run with bound parameters.

Building a SQLAlchemy statement costs more than running it on SQLite, and the door runs the
same dozen statements for every release, so each is built once here (parameters ``p_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Table, bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from services.ledger.models import budgets, datasets, deliveries, releases, tiers


def _params(table: Table, names: list[str]) -> dict[str, Any]:
    return {name: bindparam(f"p_{name}", type_=table.c[name].type) for name in names}


@dataclass(frozen=True)
class Statements:
    served: Any          # the paying role's stored copy (p_version, p_query_key, p_tier)
    spend: Any           # role spend, user spend, dataset loss (p_role, p_dataset_id, p_user)
    user_spent: Any      # one user's DP charges since p_since
    tier_payload: Any    # one stored tier's payload
    lock_dataset: Any    # upsert that locks and returns the dataset row
    lock_budget: Any     # upsert that locks and returns the (role, dataset) budget row
    insert_tier: Any     # insert-or-nothing into the tier store, returning its id
    insert_served: Any   # a served release, returning its id
    deliver: Any         # a delivery row
    charge: Any          # the budget's new spend and period
    add_loss: Any        # the dataset's loss grows


def _spend() -> Any:
    b, d, r = budgets.c, datasets.c, releases.c
    role, dataset_id, user = bindparam("p_role"), bindparam("p_dataset_id"), bindparam("p_user")

    def budget(col):
        return select(col).where(b.role == role, b.dataset_id == dataset_id).scalar_subquery()

    def dataset(col):
        return select(col).where(d.dataset_id == dataset_id).scalar_subquery()

    return select(
        budget(b.first_charge_at).label("first_charge_at"),
        budget(b.period_start).label("period_start"), budget(b.spent).label("spent"),
        dataset(d.loss).label("loss"), dataset(d.unsound_loss).label("unsound_loss"),
        select(func.coalesce(func.sum(r.epsilon), 0.0)).where(
            r.dataset_id == dataset_id, r.role == role, r.user_name == user, r.dp.is_(True),
            r.created_at >= budget(b.period_start)).scalar_subquery().label("user_spent"),
    )


@cache
def statements(dialect: str) -> Statements:
    """The statements for ``dialect`` ("sqlite" or "postgresql")."""
    ins = pg_insert if dialect == "postgresql" else sqlite_insert
    r, t, b, d = releases.c, tiers.c, budgets.c, datasets.c

    def lock(table: Table, keys: list[str], defaults: list[str]) -> Any:
        stmt = ins(table).values(_params(table, keys + defaults))
        return stmt.on_conflict_do_update(
            index_elements=[table.c[k] for k in keys], set_={keys[0]: stmt.excluded[keys[0]]},
        ).returning(*table.c)

    tier_cols = [c.name for c in tiers.c if c.name != "id"]
    served_cols = [c.name for c in releases.c if c.name != "id"]
    return Statements(
        served=select(releases).where(r.dataset_version == bindparam("p_version"),
                                      r.query_key == bindparam("p_query_key"),
                                      r.tier == bindparam("p_tier")),
        spend=_spend(),
        user_spent=select(func.coalesce(func.sum(r.epsilon), 0.0)).where(
            r.dataset_id == bindparam("p_dataset_id"), r.role == bindparam("p_role"),
            r.user_name == bindparam("p_user"), r.dp.is_(True),
            r.created_at >= bindparam("p_since", type_=r.created_at.type)),
        tier_payload=select(t.payload_json).where(
            t.dataset_version == bindparam("p_version"), t.query_key == bindparam("p_query_key"),
            t.tier == bindparam("p_tier")),
        lock_dataset=lock(datasets, ["dataset_id"], ["first_release_at", "loss", "unsound_loss"]),
        lock_budget=lock(budgets, ["role", "dataset_id"],
                         ["first_charge_at", "period_start", "spent"]),
        insert_tier=ins(tiers).values(_params(tiers, tier_cols)).on_conflict_do_nothing()
        .returning(t.id),
        insert_served=insert(releases).values(_params(releases, served_cols)).returning(r.id),
        deliver=insert(deliveries).values(_params(deliveries, [
            "release_id", "delivered_at", "user_name", "role", "channel"])),
        charge=update(budgets).where(b.role == bindparam("p_role"),
                                     b.dataset_id == bindparam("p_dataset_id"))
        .values(spent=bindparam("p_spent"),
                period_start=bindparam("p_period_start", type_=b.period_start.type)),
        add_loss=update(datasets).where(d.dataset_id == bindparam("p_dataset_id"))
        .values(loss=d.loss + bindparam("p_loss"),
                unsound_loss=d.unsound_loss + bindparam("p_unsound")),
    )
