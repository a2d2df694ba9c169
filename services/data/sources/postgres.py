"""PostgreSQL source: a table or view of a hospital warehouse, over a read-only connection.

Configured by an SQLAlchemy URL (``postgresql+psycopg://user@host/db``), a table or view name
and an optional schema name. Every session is opened with ``default_transaction_read_only``,
so even a mistaken statement could not change the warehouse; rows leave the database only
through ``read_rows`` (capped). Column types are read from the catalogue once.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from sqlalchemy import (
    Boolean,
    Double,
    Float,
    Integer,
    Numeric,
    String,
    create_engine,
    func,
    inspect,
    literal,
    select,
    tablesample,
)
from sqlalchemy.exc import SQLAlchemyError

from services.data.errors import DatasetError
from services.data.sources.base import ROW_CAP, RowSample
from services.data.sources.labels import StorageKind
from services.data.sources.sql import SqlPlan, SqlSource, sql_table, typed_rows

READ_ONLY = "-c default_transaction_read_only=on"


def sa_kind(sa_type) -> StorageKind:
    """StorageKind of a reflected SQLAlchemy type."""
    if isinstance(sa_type, Boolean):
        return StorageKind.BOOL
    if isinstance(sa_type, Integer):
        return StorageKind.INT
    if isinstance(sa_type, Float | Numeric):
        return StorageKind.FLOAT
    if isinstance(sa_type, String):
        return StorageKind.TEXT
    return StorageKind.OTHER


class PostgresSource(SqlSource):
    """Aggregates computed by PostgreSQL over ``[schema.]table``."""

    backend = "PostgreSQL"

    def __init__(self, url: str, table: str, *, schema: str | None = None,
                 pool_size: int = 2) -> None:
        self.table_name, self.schema_name = table, schema
        self.engine = create_engine(url, pool_size=pool_size, pool_pre_ping=True,
                                    connect_args={"options": READ_ONLY})
        try:
            described = inspect(self.engine).get_columns(table, schema=schema)
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise DatasetError(
                f"The PostgreSQL table '{table}' could not be read ({type(exc).__name__}); "
                "check the URL, the table or view name and the read permission."
            ) from exc
        if not described:
            self.engine.dispose()
            raise DatasetError(f"PostgreSQL has no table or view named '{table}' to read.")
        self._kinds = {str(c["name"]): sa_kind(c["type"]) for c in described}
        self._plan = SqlPlan(sql_table(table, self._kinds, schema), self._kinds)

    def _fetch(self, stmt) -> list:
        with self.engine.connect() as conn:
            return list(conn.execute(stmt).fetchall())

    def read_rows(self, columns: Sequence[str], *, cap: int = ROW_CAP,
                  seed: int = 0) -> RowSample:
        self.check_columns(columns)
        tbl = self._plan.table
        cols = [tbl.c[c] for c in columns]
        with self.engine.connect() as conn:
            total = int(conn.execute(select(func.count()).select_from(tbl)).scalar_one())
            if total <= cap:
                frame = pd.DataFrame(conn.execute(select(*cols)).fetchall(), columns=columns)
                return RowSample(typed_rows(frame, self._kinds, floats=True), False, cap)
            share = min(100.0, 110.0 * cap / total)
            sampled = tablesample(tbl, func.bernoulli(literal(share, Double())),
                                  seed=literal(int(seed), Integer()))
            stmt = select(*[sampled.c[c] for c in columns]).limit(cap)
            frame = pd.DataFrame(conn.execute(stmt).fetchall(), columns=columns)
        return RowSample(typed_rows(frame, self._kinds, floats=True), True, cap)

    def close(self) -> None:
        self.engine.dispose()

