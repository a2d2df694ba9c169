"""DuckDB source: Parquet files queried in-process (the embedded default for large files).

The web process keeps no rows: DuckDB streams the Parquet columns a query reads, with a
bounded memory limit and thread count (``DuckDBSettings``). One database per source; each
query runs on its own cursor, so threaded workers can query at the same time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from services.data.errors import DatasetError
from services.data.sources.base import ROW_CAP, RowSample
from services.data.sources.dialects import DuckDBDialect, compile_sql
from services.data.sources.labels import StorageKind
from services.data.sources.sql import SqlPlan, SqlSource, sql_table

VIEW = "cohort"


@dataclass(frozen=True)
class DuckDBSettings:
    """Per-process limits: a web worker must stay small whatever n is."""

    memory_limit: str = "512MB"
    threads: int = 2


def duck_kind(type_name: str) -> StorageKind:
    """StorageKind of a DuckDB type name."""
    t = type_name.upper()
    if t == "BOOLEAN":
        return StorageKind.BOOL
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT"):
        return StorageKind.INT
    if t in ("FLOAT", "DOUBLE") or t.startswith("DECIMAL"):
        return StorageKind.FLOAT
    if t == "VARCHAR":
        return StorageKind.TEXT
    return StorageKind.OTHER


class DuckDBSource(SqlSource):
    """Aggregates over a Parquet file (or a glob of part files) with DuckDB."""

    backend = "DuckDB"

    def __init__(self, parquet: Path | str, settings: DuckDBSettings | None = None) -> None:
        self.path = str(parquet)
        settings = settings or DuckDBSettings()
        self._lock = threading.Lock()
        self._con = duckdb.connect(config={"memory_limit": settings.memory_limit,
                                           "threads": settings.threads})
        try:
            self._con.read_parquet(self.path).create_view(VIEW)
            described = self._con.execute(f'DESCRIBE "{VIEW}"').fetchall()
        except duckdb.Error as exc:
            self._con.close()
            raise DatasetError(f"The Parquet data at '{self.path}' could not be read ({exc}).") \
                from exc
        self._kinds = {str(row[0]): duck_kind(str(row[1])) for row in described}
        self._plan = SqlPlan(sql_table(VIEW, self._kinds), self._kinds)
        self._dialect = DuckDBDialect()

    def storage_kinds(self) -> dict[str, StorageKind]:
        return dict(self._kinds)

    def _fetch(self, stmt) -> list[tuple]:
        sql, params = compile_sql(stmt, self._dialect)
        with self._lock:
            cur = self._con.cursor()
        try:
            return cur.execute(sql, params).fetchall()
        finally:
            cur.close()

    def read_rows(self, columns: Sequence[str], *, cap: int = ROW_CAP,
                  seed: int = 0) -> RowSample:
        self.check_columns(columns)
        with self._lock:
            cur = self._con.cursor()
        try:
            rel = cur.view(VIEW).select(*[duckdb.ColumnExpression(c) for c in columns])
            total = int(rel.aggregate("count(*)").fetchall()[0][0])
            if total <= cap:
                return RowSample(_frame(rel.df(), self._kinds), False, cap)
            sample = rel.sample(n=int(cap), seed=int(seed), method="reservoir")
            return RowSample(_frame(sample.df(), self._kinds), True, cap)
        finally:
            cur.close()

    def close(self) -> None:
        self._con.close()


def _frame(frame: pd.DataFrame, kinds: dict[str, StorageKind]) -> pd.DataFrame:
    """Nullable pandas types as the in-memory loader uses them (Int64, boolean, float64)."""
    for name in frame.columns:
        kind = kinds.get(str(name))
        if kind is StorageKind.INT:
            frame[name] = frame[name].astype("Int64")
        elif kind is StorageKind.BOOL:
            frame[name] = frame[name].astype("boolean")
    return frame
