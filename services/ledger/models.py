"""SQL tables of the privacy ledger: releases (also the cache), budgets, schema version.

Plain SQLAlchemy Core tables (no ORM): the ledger only runs a few fixed statements, and every
worker process starts faster without the ORM.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 2  # 2: ledger_deliveries

metadata = MetaData()
"""No schema here: a deployment may map one at run time (schema_translate_map)."""

releases = Table(
    "ledger_releases", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("user_name", String(200), nullable=False),
    Column("role", String(32), nullable=False),
    Column("dataset_id", String(200), nullable=False),
    Column("dataset_version", String(200), nullable=False),
    Column("query_key", Text, nullable=False),
    Column("tier", Integer, nullable=False),
    Column("mechanism", String(100), nullable=False),
    Column("epsilon", Float, nullable=False),
    Column("dataset_loss", Float, nullable=False, default=0.0),
    Column("answer_json", Text, nullable=False),
    # the cache key: one stored answer per (dataset version, canonical query, tier)
    UniqueConstraint("dataset_version", "query_key", "tier", name="uq_ledger_release_key"),
    Index("ix_ledger_release_user", "user_name"),
    Index("ix_ledger_release_dataset", "dataset_id"),
)
"""One noisy answer that left the server, with its cost."""

budgets = Table(
    "ledger_budgets", metadata,
    Column("role", String(32), primary_key=True),
    Column("dataset_id", String(200), primary_key=True),
    Column("first_charge_at", DateTime(timezone=True), nullable=False),
    Column("period_start", DateTime(timezone=True), nullable=False),
    Column("spent", Float, nullable=False, default=0.0),
)
"""Running spend of one (role, dataset) budget; the row every charge locks."""

meta = Table(
    "ledger_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(200), nullable=False),
)
"""Key/value facts about the ledger itself (schema version)."""

deliveries = Table(
    "ledger_deliveries", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("release_id", Integer, nullable=False),
    Column("delivered_at", DateTime(timezone=True), nullable=False),
    Column("user_name", String(200), nullable=False),
    Column("role", String(32), nullable=False),
    Index("ix_ledger_delivery_release", "release_id"),
    Index("ix_ledger_delivery_user", "user_name"),
)
"""A stored answer served again from the cache (free), and to whom: the audit trail of reuse."""
