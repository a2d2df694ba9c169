"""SQL tables of published pages, kept in the ledger's database (SQLite or PostgreSQL).

A page points at served releases of the ledger (``release_id``): it stores no number of its
own, so what a partner sees is exactly what the ledger served and charged.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()
"""Apart from the ledger's metadata: the ledger's migrations never touch these tables."""

pages = Table(
    "publish_pages", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("slug", String(80), nullable=False, unique=True),
    Column("title", String(200), nullable=False),
    Column("dataset_id", String(200), nullable=False),
    Column("audience_kind", String(8), nullable=False),     # "role" | "user"
    Column("audience", String(200), nullable=False),        # a role value or a user name
    Column("tier_role", String(32), nullable=False),        # the role whose tier is shown
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("withdrawn", Boolean, nullable=False, default=False),
    Column("created_by", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
"""One published page: who it is for, until when, and whether the owner withdrew it."""

figures = Table(
    "publish_figures", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("page_id", Integer, ForeignKey("publish_pages.id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("caption", Text, nullable=False),
    Column("release_id", Integer, nullable=False),         # ledger_releases.id
    Column("request_json", Text, nullable=False),          # the view request (public)
    UniqueConstraint("page_id", "position", name="uq_publish_figure_position"),
    Index("ix_publish_figure_page", "page_id"),
)
"""The page's figures in order: a caption and the ledger's served release at the page's tier."""

cohorts = Table(
    "publish_cohorts", metadata,
    Column("dataset_id", String(200), primary_key=True),
    Column("period", String(200), nullable=False),
    Column("inclusion", Text, nullable=False),
    Column("source", String(300), nullable=False),
    Column("updated_by", String(200), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
"""The owner's description of a dataset's cohort, shown at the top of its published pages:
words the owner wrote (period, inclusion criteria, source), never a number computed from the
data (the page adds the dataset version's DP number of records)."""
