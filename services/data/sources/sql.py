"""Aggregate queries as SQLAlchemy Core statements, one plan for DuckDB, PostgreSQL and Spark.

Each statement follows ``dp_engine.sound.aggregates`` operation by operation:

* a record is kept when every column it reads is present: not NULL, not NaN, not a declared
  missing-value code, and (for categories and groups) its value is one of the public labels
  or the column declares a catch-all level;
* categories and groups are matched by typed value (``labels.typed_value``), never by
  casting cells to text;
* numeric bins: a binary search of CASE comparisons against the public edges (no arithmetic,
  so no rounding can move a value across an edge);
* lattice sums: CASE clamp, minus mid, times 1/step (a power of two), half-even ``rint``,
  cast to BIGINT and summed as integers (exact in every engine);
* candidates: ``floor((clamp(x) − lower) · s)`` clipped to [0, c − 1], plus one.

Identifiers are quoted by SQLAlchemy and every value (edges, bounds, labels, codes) is a
bound parameter: nothing from a schema or a request is formatted into the SQL text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import (
    BigInteger,
    Double,
    case,
    cast,
    column,
    func,
    literal,
    not_,
    null,
    or_,
    select,
    table,
    union_all,
)
from sqlalchemy.sql.elements import ColumnElement, quoted_name

from dp_engine.sound.aggregates import CandidateCounts, CellCounts, MomentSums, lattice_plan
from services.data.sources.base import DataSource
from services.data.sources.dialects import rint
from services.data.sources.labels import StorageKind, code_value, typed_value
from services.data.sources.query import AggregateKind, AggregateQuery

NAN = float("nan")
_NULL = cast(null(), BigInteger())


def _double(value: float) -> ColumnElement:
    return literal(float(value), Double())


def _int(value: int) -> ColumnElement:
    return literal(int(value), BigInteger())


def sql_table(name: str, columns: Iterable[str], schema: str | None = None):
    """A lightweight table clause; every identifier is quoted."""
    cols = [column(quoted_name(c, quote=True)) for c in columns]
    return table(quoted_name(name, quote=True), *cols,
                 schema=None if schema is None else quoted_name(schema, quote=True))


class SqlPlan:
    """Builds the statement of an AggregateQuery over one table and reads its result rows."""

    def __init__(self, tbl: Any, kinds: dict[str, StorageKind]) -> None:
        self.table = tbl
        self.kinds = kinds

    # ---- public ----------------------------------------------------------------------
    def statement(self, query: AggregateQuery, index: int = 0):
        """One SELECT with the uniform columns (q, g, c, n, s1, s2); NULL where unused."""
        if query.kind is AggregateKind.MOMENTS:
            return self._moments(query, index)
        return self._cells(query, index)

    def statements(self, queries: Sequence[AggregateQuery]):
        """Every query in one statement (UNION ALL): one round trip, one engine job."""
        parts = [self.statement(q, i) for i, q in enumerate(queries)]
        return parts[0] if len(parts) == 1 else union_all(*parts)

    def results(self, queries: Sequence[AggregateQuery], rows: Sequence[Sequence[Any]]):
        """The aggregate dataclass of each query from the rows of ``statements``."""
        by_query: list[list[Sequence[Any]]] = [[] for _ in queries]
        for row in rows:
            by_query[int(row[0])].append(row)
        return [self.result(q, r) for q, r in zip(queries, by_query, strict=True)]

    def result(self, query: AggregateQuery, rows: Sequence[Sequence[Any]]):
        """The aggregate dataclass from rows (q, g, c, n, s1, s2) of one query."""
        if query.kind is AggregateKind.MOMENTS:
            count = np.zeros(query.n_groups)
            s1 = np.zeros(query.n_groups)
            s2 = np.zeros(query.n_groups) if query.squares else None
            for _, g, _, n, t1, t2 in rows:
                count[int(g)], s1[int(g)] = float(int(n)), float(int(t1))
                if s2 is not None:
                    s2[int(g)] = float(int(t2))
            return MomentSums(float(query.lower), float(query.upper), count, s1, s2)
        counts = np.zeros((query.n_groups, query.n_cells), dtype=np.int64)
        for _, g, cell, n, _, _ in rows:
            counts[int(g), int(cell)] = int(n)
        if query.kind is AggregateKind.CANDIDATES:
            return CandidateCounts(float(query.lower), float(query.upper),
                                   int(query.n_candidates), counts)
        return CellCounts(counts)

    # ---- statements ----------------------------------------------------------------------
    def _cells(self, query: AggregateQuery, index: int):
        if query.kind is AggregateKind.CANDIDATES:
            cell = self._candidate_cell(query)
        elif query.column is None:
            cell = _int(0)
        elif query.categories is not None:
            cell = self._label_code(query, query.column, query.categories)
        else:
            cell = self._edge_cell(self._number(query.column), query.edges)
        inner = self._base(query, cell.label("c")).subquery(f"cells{index}")
        keys = ([inner.c.g] if query.group is not None else []) + [inner.c.c]
        g = inner.c.g if query.group is not None else _int(0)
        return (select(_int(index).label("q"), g.label("g"), inner.c.c, func.count().label("n"),
                       _NULL.label("s1"), _NULL.label("s2"))
                .where(*[k.is_not(None) for k in keys])
                .group_by(*keys))

    def _moments(self, query: AggregateQuery, index: int):
        lower, upper = float(query.lower), float(query.upper)
        mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
        grid, _ = lattice_plan(lower, upper, query.squares)
        centred = self._clamped(query) - _double(mid)
        inner = self._base(query, centred.label("c")).subquery(f"centred{index}")
        c = inner.c.c
        terms = [cast(rint(c * _double(1.0 / grid["sum"])), BigInteger).label("s1")]
        if query.squares:
            sq = (c * c - _double(half * half / 2.0)) * _double(1.0 / grid["sumsq"])
            terms.append(cast(rint(sq), BigInteger).label("s2"))
        keys = [inner.c.g] if query.group is not None else []
        lattice = select(*keys, *terms).select_from(inner).subquery(f"lattice{index}")
        gkeys = [lattice.c.g] if query.group is not None else []
        s2 = func.sum(lattice.c.s2) if query.squares else _NULL
        stmt = select(_int(index).label("q"), (gkeys[0] if gkeys else _int(0)).label("g"),
                      _NULL.label("c"), func.count().label("n"),
                      func.sum(lattice.c.s1).label("s1"), s2.label("s2"))
        if gkeys:
            stmt = stmt.where(gkeys[0].is_not(None)).group_by(*gkeys)
        return stmt

    def _base(self, query: AggregateQuery, cell: ColumnElement):
        """SELECT [group code AS g,] cell AS c FROM table WHERE every read column is present."""
        cols = []
        if query.group is not None:
            cols.append(self._label_code(query, query.group, query.group_keys).label("g"))
        cols.append(cell)
        return select(*cols).select_from(self.table).where(*self._present(query))

    # ---- expressions ---------------------------------------------------------------------
    def _col(self, name: str) -> ColumnElement:
        return self.table.c[name]

    def _number(self, name: str) -> ColumnElement:
        return cast(self._col(name), Double())

    def _present(self, query: AggregateQuery) -> list[ColumnElement]:
        conds: list[ColumnElement] = []
        for name in query.columns:
            col, kind = self._col(name), self.kinds[name]
            conds.append(col.is_not(None))
            if kind is StorageKind.FLOAT:
                conds.append(not_(col == _double(NAN)))  # NaN is missing, as in pandas
            codes = [v for v in (code_value(c, kind) for c in query.rules_for(name)
                                 .missing_codes) if v is not None]
            if codes:
                conds.append(not_(or_(*[col == _typed(v, kind) for v in codes])))
        return conds

    def _label_code(self, query: AggregateQuery, name: str,
                    labels: Sequence[str]) -> ColumnElement:
        """Position of the cell's value in the public ``labels`` (NULL when outside)."""
        col, kind = self._col(name), self.kinds[name]
        other = query.rules_for(name).other_level
        whens = [(col == _typed(v, kind), _int(i)) for i, v in
                 ((i, typed_value(lab, kind)) for i, lab in enumerate(labels)) if v is not None]
        fallback = _int(list(labels).index(other)) if other in labels else null()
        if not whens:
            return cast(fallback, BigInteger)
        return case(*whens, else_=fallback)

    def _edge_cell(self, x: ColumnElement, edges: Sequence[float]) -> ColumnElement:
        """Bin index by binary search over the inner edges: #{inner edges ≤ x}."""
        inner = [float(e) for e in edges[1:-1]]

        def search(lo: int, hi: int) -> ColumnElement:  # the answer lies in [lo, hi]
            if lo == hi:
                return _int(lo)
            mid = (lo + hi + 1) // 2
            return case((x >= _double(inner[mid - 1]), search(mid, hi)), else_=search(lo, mid - 1))

        return search(0, len(inner))

    def _clamped(self, query: AggregateQuery) -> ColumnElement:
        x = self._number(query.column)
        lo, hi = _double(query.lower), _double(query.upper)
        return case((x < lo, lo), (x > hi, hi), else_=x)

    def _candidate_cell(self, query: AggregateQuery) -> ColumnElement:
        c = int(query.n_candidates)
        lower, upper = float(query.lower), float(query.upper)
        scale = (c - 1) / (upper - lower)
        pos = cast(func.floor((self._clamped(query) - _double(lower)) * _double(scale)),
                   BigInteger)
        return case((pos < 0, _int(0)), (pos > c - 1, _int(c - 1)), else_=pos) + _int(1)


class SqlSource(DataSource):
    """A source whose aggregates are one SQL statement per batch of queries."""

    _plan: SqlPlan

    def _fetch(self, stmt) -> list[Sequence[Any]]:
        raise NotImplementedError

    def aggregate_many(self, queries: Sequence[AggregateQuery]) -> list:
        queries = list(queries)
        if not queries:
            return []
        for q in queries:
            self.check_columns(q.columns)
        return self._plan.results(queries, self._fetch(self._plan.statements(queries)))

    def _one(self, query: AggregateQuery):
        return self.aggregate_many([query])[0]

    cell_counts = moment_sums = candidate_counts = _one

    def aggregate(self, query: AggregateQuery):
        return self._one(query)


def _typed(value: object, kind: StorageKind) -> ColumnElement:
    if kind is StorageKind.FLOAT:
        return _double(value)  # type: ignore[arg-type]
    if kind is StorageKind.INT:
        return _int(value)  # type: ignore[arg-type]
    return literal(value)

