"""DuckDB source: Parquet files queried in-process (the embedded default for large files).

The web process keeps no rows: DuckDB streams the Parquet columns a query reads, with a
bounded memory limit and thread count (``DuckDBSettings``). One database per source; each
query runs on its own cursor, so threaded workers can query at the same time.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from services.data.errors import DatasetError
from services.data.sources.base import ROW_CAP, RowSample
from services.data.sources.dialects import DuckDBDialect, compile_sql
from services.data.sources.labels import StorageKind
from services.data.sources.sql import SqlPlan, SqlSource, sql_table, typed_rows
from services.lazy import lazy

duckdb = lazy("duckdb")  # loaded on first use: not at app start

VIEW = "cohort"
WEIGHT = "__cohort_records__"
COMPACT_MAX_ROWS = 200_000
"""Largest precomputed table kept: (distinct values of the columns a view reads) x count."""
ROLLUP_MAX_ROWS = 1_000_000
"""Largest table of combinations the few-valued columns' sets are rolled up from (at load)."""


@dataclass(frozen=True)
class Precomputed:
    """What building a source's compact tables at load did: how many column sets were
    written now, found already on disk, or left to the data (too many combinations)."""

    built: int = 0
    kept: int = 0
    too_large: int = 0
    seconds: float = 0.0

    @property
    def sets(self) -> int:
        return self.built + self.kept + self.too_large


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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

    @contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of the shared connection (made under the lock), closed after use."""
        with self._lock:
            cur = self._con.cursor()
        try:
            yield cur
        finally:
            cur.close()

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
        if self.precompute_dir is None:
            return None
        if not columns:   # the number of records: any kept table's counts sum to it
            return next((p for p in list(self._compact.values()) if p is not None), None)
        key = tuple(sorted(columns))
        if key in self._compact:
            return self._compact[key]
        with self._compact_lock:
            if key not in self._compact:
                self._compact[key] = self._load_compact(key)
        return self._compact[key]

    def _compact_path(self, key: tuple[str, ...]) -> Path:
        assert self.precompute_dir is not None
        name = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
        return self.precompute_dir / f"{name}.parquet"

    def precompute(self, column_sets: Iterable[Sequence[str]],
                   few_values: Iterable[str] = ()) -> Precomputed:
        """Build now (at load) the compact table of every column set not on disk yet, so no
        request pays for it, the first one after a load included.

        Hashing every row once per set is what costs, so the sets of ``few_values`` columns
        (public categories: a few values each) are rolled up from one table of the records
        per combination of all those columns (one scan, a few hundred thousand rows at most);
        every other set is grouped from the data on its own and kept only when it has at most
        ``COMPACT_MAX_ROWS`` combinations (else its views read the data). Workers share the
        tables on disk; a file lock makes a second worker wait and then find them built.
        """
        t0 = time.perf_counter()
        if self.precompute_dir is None:
            return Precomputed()
        keys = list(dict.fromkeys(tuple(sorted(set(c))) for c in column_sets
                                  if c and set(c) <= set(self._kinds)))
        few = set(few_values)
        self.precompute_dir.mkdir(parents=True, exist_ok=True)
        with open(self.precompute_dir / ".build.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                todo = [k for k in keys if not self._compact_path(k).exists()
                        and not self._compact_path(k).with_suffix(".skip").exists()]
                rolled = self._rollup([k for k in todo if set(k) <= few])
                for key in todo:
                    if key not in rolled:
                        self._compact[key] = self._load_compact(key)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        for key in keys:
            self._compact_plan(key)
        too_large = sum(self._compact.get(k) is None for k in todo)
        return Precomputed(len(todo) - too_large, len(keys) - len(todo), too_large,
                           time.perf_counter() - t0)

    def _rollup(self, sets: list[tuple[str, ...]]) -> set[tuple[str, ...]]:
        """Write ``sets`` from one grouping of the data by all their columns; the sets done
        (none when that grouping has more than ``ROLLUP_MAX_ROWS`` combinations)."""
        if not sets:
            return set()
        names = sorted({c for k in sets for c in k})
        base = f"rollup_{os.getpid()}_{threading.get_ident()}"
        with self._lock:
            cur = self._con.cursor()
        try:
            cur.execute(f"CREATE TEMP TABLE {base} AS SELECT {', '.join(map(_quote, names))}, "
                        f"count(*) AS {_quote(WEIGHT)} FROM {_quote(VIEW)} GROUP BY ALL "
                        f"LIMIT {ROLLUP_MAX_ROWS + 1}")
            got = cur.execute(f"SELECT count(*) FROM {base}").fetchall()[0][0]
            if int(got) > ROLLUP_MAX_ROWS:
                return set()
            done = set()
            for key in sets:
                cols = ", ".join(map(_quote, key))
                path = self._compact_path(key)
                size = cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM {base} "
                                   f"GROUP BY {cols})").fetchall()[0][0]
                if int(size) > COMPACT_MAX_ROWS:
                    path.with_suffix(".skip").touch()
                    self._compact[key] = None
                    done.add(key)
                    continue
                part = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}"
                                      ".parquet")
                select = ", ".join(f"CAST({_quote(c)} AS {self._types[c]}) AS {_quote(c)}"
                                   for c in key)
                target = str(part).replace("'", "''")
                cur.execute(f"COPY (SELECT {select}, CAST(sum({_quote(WEIGHT)}) AS BIGINT) AS "
                            f"{_quote(WEIGHT)} FROM {base} GROUP BY {cols}) "
                            f"TO '{target}' (FORMAT parquet)")
                os.replace(part, path)
                done.add(key)
            return done
        finally:
            cur.execute(f"DROP TABLE IF EXISTS {base}")
            cur.close()

    def _load_compact(self, key: tuple[str, ...]) -> SqlPlan | None:
        from sqlalchemy import func, select

        path = self._compact_path(key)
        name = path.stem
        skip = path.with_suffix(".skip")
        if skip.exists():
            return None
        if not path.exists():
            tbl = self._plan.table
            cols = [tbl.c[c] for c in key]
            stmt = select(*cols, func.count().label(WEIGHT)).group_by(*cols) \
                .limit(COMPACT_MAX_ROWS + 1)
            sql, params = compile_sql(stmt, self._dialect)
            with self._cursor() as cur:
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
        view = f"compact_{name}"
        with self._lock:
            self._con.read_parquet(str(path)).create_view(view, replace=True)
        kinds = {c: self._kinds[c] for c in key} | {WEIGHT: StorageKind.INT}
        return SqlPlan(sql_table(view, kinds), kinds, weight=WEIGHT)

    def _fetch(self, stmt) -> list[tuple]:
        sql, params = compile_sql(stmt, self._dialect)
        with self._cursor() as cur:
            return cur.execute(sql, params).fetchall()

    def read_rows(self, columns: Sequence[str], *, cap: int = ROW_CAP,
                  seed: int = 0) -> RowSample:
        self.check_columns(columns)
        with self._cursor() as cur:
            rel = cur.view(VIEW).select(*[duckdb.ColumnExpression(c) for c in columns])
            total = int(rel.aggregate("count(*)").fetchall()[0][0])
            if total <= cap:
                return RowSample(typed_rows(rel.df(), self._kinds), False, cap)
            sample = rel.sample(n=int(cap), seed=int(seed), method="reservoir")
            return RowSample(typed_rows(sample.df(), self._kinds), True, cap)

    def close(self) -> None:
        self._con.close()

