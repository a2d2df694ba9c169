"""SQL tables of the privacy ledger: releases (also the cache), budgets, schema version."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 1


class Base(DeclarativeBase):
    """Declarative base of the ledger tables (schema mapped at run time)."""


class ReleaseRow(Base):
    """One noisy answer that left the server, with its cost. Unique per cache key."""

    __tablename__ = "ledger_releases"
    __table_args__ = (
        UniqueConstraint("dataset_version", "query_key", "tier", name="uq_ledger_release_key"),
        Index("ix_ledger_release_user", "user_name"),
        Index("ix_ledger_release_dataset", "dataset_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    user_name: Mapped[str] = mapped_column(String(200), nullable=False)
    role: Mapped[str] = mapped_column(String(32), nullable=False)
    dataset_id: Mapped[str] = mapped_column(String(200), nullable=False)
    dataset_version: Mapped[str] = mapped_column(String(200), nullable=False)
    query_key: Mapped[str] = mapped_column(Text, nullable=False)
    tier: Mapped[int] = mapped_column(Integer, nullable=False)
    mechanism: Mapped[str] = mapped_column(String(100), nullable=False)
    epsilon: Mapped[float] = mapped_column(Float, nullable=False)
    dataset_loss: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    answer_json: Mapped[str] = mapped_column(Text, nullable=False)


class BudgetRow(Base):
    """Running spend of one (role, dataset) budget; the row every charge locks."""

    __tablename__ = "ledger_budgets"

    role: Mapped[str] = mapped_column(String(32), primary_key=True)
    dataset_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    first_charge_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    period_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    spent: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)


class MetaRow(Base):
    """Key/value facts about the ledger itself (schema version)."""

    __tablename__ = "ledger_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200), nullable=False)
