"""DuckDB source: Parquet files queried in-process (the embedded default for large files).

The web process keeps no rows: DuckDB streams the Parquet columns a query reads, with a
bounded memory limit and thread count (``DuckDBSettings``). One database per source; each
query runs on its own cursor, so threaded workers can query at the same time.
"""

from __future__ import annotations

import hashlib
import json
import os
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
WEIGHT = "__cohort_records__"
COMPACT_MAX_ROWS = 200_000
"""Largest precomputed table kept: (distinct values of the columns a view reads) x count."""


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

    def __init__(self, parquet: Path | str, settings: DuckDBSettings | None = None, *,
                 precompute_dir: Path | None = None) -> None:
        self.path = str(parquet)
        settings = settings or DuckDBSettings()
        self.precompute_dir = None if precompute_dir is None else Path(precompute_dir)
        self._compact: dict[tuple[str, ...], SqlPlan | None] = {}
        self._compact_lock = threading.Lock()
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
        self._types = {str(row[0]): str(row[1]) for row in described}
        self._plan = SqlPlan(sql_table(VIEW, self._kinds), self._kinds)
        self._dialect = DuckDBDialect()

    def storage_kinds(self) -> dict[str, StorageKind]:
        return dict(self._kinds)

    def aggregate(self, query):
        """On a precomputed table of the query's columns when there is one, else the data."""
        self.check_columns(query.columns)
        plan = self._compact_plan(query.columns) or self._plan
        return plan.result(query, self._fetch(plan.statement(query)))

    cell_counts = moment_sums = candidate_counts = aggregate

    def _compact_plan(self, columns: Sequence[str]) -> SqlPlan | None:
        """Records per distinct combination of ``columns``, computed once and kept on disk.

        Exact: every aggregate is a sum over records, and records with equal values in the
        columns a query reads contribute equally, so summing (value combination x count)
        gives the same integers. Skipped when the combinations are too many to save work.
        """
        if self.precompute_dir is None or not columns:
            return None
        key = tuple(sorted(columns))
        if key in self._compact:
            return self._compact[key]
        with self._compact_lock:
            if key not in self._compact:
                self._compact[key] = self._load_compact(key)
        return self._compact[key]

    def _load_compact(self, key: tuple[str, ...]) -> SqlPlan | None:
        from sqlalchemy import func, select

        name = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        path = self.precompute_dir / f"{name}.parquet"
        skip = path.with_suffix(".skip")
        if skip.exists():
            return None
        if not path.exists():
            tbl = self._plan.table
            cols = [tbl.c[c] for c in key]
            stmt = select(*cols, func.count().label(WEIGHT)).group_by(*cols) \
                .limit(COMPACT_MAX_ROWS + 1)
            sql, params = compile_sql(stmt, self._dialect)
            with self._lock:
                cur = self._con.cursor()
            try:
                frame = cur.execute(sql, params).df()
                self.precompute_dir.mkdir(parents=True, exist_ok=True)
                if len(frame) > COMPACT_MAX_ROWS:
                    skip.touch()
                    return None
                tmp = path.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.parquet")
                exprs = [duckdb.ColumnExpression(c).cast(duckdb.sqltype(self._types[c])).alias(c)
                         for c in key] + [duckdb.ColumnExpression(WEIGHT).cast(
                             duckdb.sqltype("BIGINT")).alias(WEIGHT)]
                cur.from_df(frame).select(*exprs).write_parquet(str(tmp))
                os.replace(tmp, path)
            finally:
                cur.close()
        view = f"compact_{name}"
        with self._lock:
            self._con.read_parquet(str(path)).create_view(view, replace=True)
        kinds = {c: self._kinds[c] for c in key} | {WEIGHT: StorageKind.INT}
        return SqlPlan(sql_table(view, kinds), kinds, weight=WEIGHT)

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
