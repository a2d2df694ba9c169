"""SQL tables of the privacy ledger: served releases (also the cache), the tier store,
budgets, each dataset's loss, deliveries and the schema version.

Plain SQLAlchemy Core tables (no ORM): the ledger only runs a few fixed statements, and every
worker process starts faster without the ORM.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
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

SCHEMA_VERSION = 4
"""2: ledger_deliveries; 3: tier store, dataset loss, dp flag, channel; 4: lazy tiers (per-group
ε, disclosure, how each tier was drawn) and budgets kept in the ledger (ledger_policy)."""

metadata = MetaData()
"""No schema here: a deployment may map one at run time (schema_translate_map)."""

ID_MAX = 2**31 - 1
"""The largest row id: ids are INTEGER (int4 on PostgreSQL), drawn by the database from 1 up,
so a larger number (from a URL or a form) names no row and is never sent to the database."""

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
    Column("dp", Boolean, nullable=False, default=True),
    # the cache key: one stored answer per (dataset version, canonical query as a role, tier)
    UniqueConstraint("dataset_version", "query_key", "tier", name="uq_ledger_release_key"),
    Index("ix_ledger_release_user", "user_name"),
    Index("ix_ledger_release_dataset", "dataset_id"),
    Index("ix_ledger_release_spend", "dataset_id", "role", "user_name"),
)
"""One answer served to a role, with what the role paid (``epsilon`` when ``dp``; a paper-mode
row, ``dp`` false, records its effective ε as a lower bound and is charged nothing) and how much
the dataset-level loss grew to produce it (``dataset_loss``)."""

tiers = Table(
    "ledger_tiers", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("dataset_id", String(200), nullable=False),
    Column("dataset_version", String(200), nullable=False),
    Column("query_key", Text, nullable=False),
    Column("tier", Integer, nullable=False),
    Column("mechanism", String(100), nullable=False),
    Column("epsilon", Float, nullable=False),
    Column("dataset_loss", Float, nullable=False),
    Column("refined_from", Integer, nullable=True),
    Column("dp", Boolean, nullable=False, default=True),
    Column("payload_json", Text, nullable=False),
    Column("epsilons_json", Text, nullable=True),
    Column("drawn", String(16), nullable=True),
    Column("disclosed_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("dataset_version", "query_key", "tier", name="uq_ledger_tier_key"),
    Index("ix_ledger_tier_dataset", "dataset_id"),
)
"""The tier store: every draw behind the answers (the tiers of each query, the calibration
releases) with its raw noisy statistics, server side only. ``epsilons_json``: ε per group;
``drawn``: fresh, refined, sharpened or bridged (services/ledger/chain.py), ``refined_from``
the stored tier it was drawn from; ``disclosed_at``: when it first left the owner (served to
another role, published, or a table that leaves the hospital), None while only the owner has
seen it; ``dataset_loss``: what its disclosure added to the dataset's loss."""

datasets = Table(
    "ledger_datasets", metadata,
    Column("dataset_id", String(200), primary_key=True),
    Column("first_release_at", DateTime(timezone=True), nullable=False),
    Column("loss", Float, nullable=False, default=0.0),
    Column("unsound_loss", Float, nullable=False, default=0.0),
)
"""Running dataset-level loss (sum of the tier store's DP losses) and, apart, the lower bound
of paper-mode releases (not DP); the row every release on the dataset locks first."""

budgets = Table(
    "ledger_budgets", metadata,
    Column("role", String(32), primary_key=True),
    Column("dataset_id", String(200), primary_key=True),
    Column("first_charge_at", DateTime(timezone=True), nullable=False),
    Column("period_start", DateTime(timezone=True), nullable=False),
    Column("spent", Float, nullable=False, default=0.0),
)
"""Running spend of one (role, dataset) budget; the row every charge locks."""

plans = Table(
    "ledger_plans", metadata,
    Column("key", String(64), primary_key=True),
    Column("dataset_version", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("payload_json", Text, nullable=False),
)
"""Per-group ε plans of views (``dp_engine.sound.plan_tiers``) by a hash of their public
inputs and of the planning code: a pure function of public data, so one worker's plan (a box
plot's takes seconds) serves every worker and restart. Not a release; nothing private."""

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
    Column("channel", String(32), nullable=False, default="explore"),
    Index("ix_ledger_delivery_release", "release_id"),
    Index("ix_ledger_delivery_user", "user_name"),
)
"""A stored answer handed out again (free), to whom and through which page (``channel``): the
audit trail of reuse."""

policy = Table(
    "ledger_policy", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("changed_at", DateTime(timezone=True), nullable=False),
    Column("user_name", String(200), nullable=False),
    Column("dataset_id", String(200), nullable=False),     # "*": every dataset
    Column("key", String(64), nullable=False),
    Column("value", Float, nullable=True),                 # None: unlimited
    Index("ix_ledger_policy_dataset", "dataset_id"),
)
"""Budgets set by the owner on the Ledger page, append-only: the newest row per (dataset, key)
is in force, every earlier one stays as the record of who changed what and when. Keys:
``budget:<role>``, ``user_limit:<role>``, ``dataset_cap``. Environment settings are the
defaults underneath."""
