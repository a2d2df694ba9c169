"""Create the ledger's tables, and bring a ledger written by an older version up to date.

Schema 3 (this version) moved internal releases out of the served releases: older ledgers
stored materialized tiers and the calibration count as releases of a "system" user charged to
the owner's budget. They are moved to the tier store under a ``legacy:`` key (their loss still
counts; they are never looked up again), paper-mode rows are marked not DP, and every budget's
spend and dataset's loss is recomputed from the rows, so the figures add up.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, func, inspect, select, text, update

from services.ledger.chain import eps_json
from services.ledger.db import Database, aware
from services.ledger.models import (
    SCHEMA_VERSION,
    budgets,
    datasets,
    deliveries,
    meta,
    metadata,
    releases,
    tiers,
)

_PG_DDL_LOCK = 0x1ED6E8  # advisory-lock key serializing CREATE on PostgreSQL
LEGACY_SYSTEM_USER = "system (materialized tiers)"
LEGACY_PREFIX = "legacy:"
MIGRATED = "schema-3"
"""``drawn`` of a tier stored before lazy tiers: counted when drawn, under the rules of then."""


def create_or_migrate(db: Database) -> None:
    """Create missing tables; migrate an older schema; refuse a newer one."""
    with db.tx(write=True) as conn:
        if db.dialect == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_DDL_LOCK})
            if db.schema:
                conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{db.schema}"'))
        metadata.create_all(conn)
        conn.execute(db.insert_ignore(meta, key="schema_version", value=str(SCHEMA_VERSION)))
        stored = int(conn.execute(
            select(meta.c.value).where(meta.c.key == "schema_version")).scalar_one())
        if stored < 3:
            _to_schema_3(db, conn)
        if stored < 4:
            _to_schema_4(db, conn)
        if stored < SCHEMA_VERSION:
            conn.execute(update(meta).where(meta.c.key == "schema_version")
                         .values(value=str(SCHEMA_VERSION)))
    if stored > SCHEMA_VERSION:
        raise RuntimeError(
            f"The ledger database was written by a newer version (schema {stored}); "
            "upgrade the app before using it."
        )


def _add_column(db: Database, conn: Connection, table, ddl: str) -> None:
    name = ddl.split()[0]
    present = {c["name"] for c in inspect(conn).get_columns(table.name, schema=db.schema)}
    if name not in present:
        qualified = f'"{db.schema}".{table.name}' if db.schema else table.name
        conn.execute(text(f"ALTER TABLE {qualified} ADD COLUMN {ddl}"))


def _to_schema_3(db: Database, conn: Connection) -> None:
    _add_column(db, conn, releases, "dp BOOLEAN NOT NULL DEFAULT TRUE")
    _add_column(db, conn, deliveries, "channel VARCHAR(32) NOT NULL DEFAULT 'explore'")
    r = releases.c
    system = conn.execute(select(releases).where(r.user_name == LEGACY_SYSTEM_USER)).mappings()
    for row in system.all():
        conn.execute(tiers.insert().values(
            created_at=row["created_at"], dataset_id=row["dataset_id"],
            dataset_version=row["dataset_version"],
            query_key=LEGACY_PREFIX + row["query_key"], tier=row["tier"],
            mechanism=row["mechanism"], epsilon=row["epsilon"],
            dataset_loss=row["dataset_loss"], refined_from=None,
            dp=not row["mechanism"].startswith("PyDPLib"), payload_json=row["answer_json"]))
    conn.execute(releases.delete().where(r.user_name == LEGACY_SYSTEM_USER))
    conn.execute(update(releases).where(r.mechanism.like("%paper mode%")).values(dp=False))
    for b in conn.execute(select(budgets)).mappings().all():
        spent = conn.execute(select(func.coalesce(func.sum(r.epsilon), 0.0)).where(
            r.role == b["role"], r.dataset_id == b["dataset_id"], r.dp.is_(True),
            r.created_at >= aware(b["period_start"]))).scalar_one()
        conn.execute(update(budgets).where(budgets.c.role == b["role"],
                                           budgets.c.dataset_id == b["dataset_id"])
                     .values(spent=float(spent)))
    t = tiers.c
    per_dataset = conn.execute(select(
        t.dataset_id, func.min(t.created_at),
        func.sum(t.dataset_loss).filter(t.dp.is_(True)),
        func.sum(t.dataset_loss).filter(t.dp.is_(False)),
    ).group_by(t.dataset_id)).all()
    for dataset_id, first, loss, unsound in per_dataset:
        conn.execute(db.insert_ignore(datasets, dataset_id=dataset_id, first_release_at=first,
                                      loss=float(loss or 0.0), unsound_loss=float(unsound or 0.0)))


def _to_schema_4(db: Database, conn: Connection) -> None:
    """Lazy tiers: every tier stored before was counted in the dataset's loss when drawn, so it
    is recorded as disclosed then; its per-group ε is read from its payload."""
    _add_column(db, conn, tiers, "epsilons_json TEXT")
    _add_column(db, conn, tiers, "drawn VARCHAR(16)")
    _add_column(db, conn, tiers, "disclosed_at TIMESTAMP WITH TIME ZONE"
                if db.dialect == "postgresql" else "disclosed_at DATETIME")
    t = tiers.c
    rows = conn.execute(select(t.id, t.created_at, t.refined_from, t.payload_json)
                        .where(t.epsilons_json.is_(None))).all()
    for row in rows:
        try:
            params = json.loads(row.payload_json).get("params") or {}
        except (ValueError, AttributeError):
            params = {}
        eps = params.get("epsilon_by_group")
        conn.execute(update(tiers).where(t.id == row.id).values(
            epsilons_json=eps_json(eps) if eps is not None else None,
            drawn=MIGRATED, disclosed_at=row.created_at))
