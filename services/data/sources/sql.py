"""Aggregate queries as SQLAlchemy Core statements, one plan for DuckDB, PostgreSQL and Spark.

Each statement follows ``dp_engine.sound.aggregates`` operation by operation, and groups by
raw stored values so the engine does the heavy part (scan, arithmetic, GROUP BY) while this
module maps the few distinct values to public positions afterwards:

* a record is kept when every column it reads is present: not NULL, not NaN, not a declared
  missing-value code; for categories and groups its value must be one of the public values
  (an IN list of typed values, ``labels.typed_value``) unless the column has a catch-all
  level, which then takes every other value. Cells are never cast to text;
* numeric bins (the schema's equal-width edges): p = (clamp(x) − first) · (bins / width) and
  floor(p) as in the reference; a value within 1e-6 bin widths of an edge is returned as
  itself and binned here by the reference's own exact rule, so no rounding can move a
  value across an edge. Unequal edges use a binary search of CASE comparisons;
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
import pandas as pd
from sqlalchemy import (
    BigInteger,
    Double,
    case,
    cast,
    column,
    false,
    func,
    literal,
    not_,
    null,
    or_,
    select,
    table,
)
from sqlalchemy.sql.elements import ColumnElement, quoted_name

from dp_engine.sound.aggregates import (
    CandidateCounts,
    CellCounts,
    MomentSums,
    _edge_index,
    lattice_plan,
)
from services.data.sources.base import DataSource
from services.data.sources.dialects import rint
from services.data.sources.labels import StorageKind, code_value, typed_value
from services.data.sources.query import AggregateKind, AggregateQuery

NAN = float("nan")
EDGE_MARGIN = 1e-6  # in bin widths: values closer to an edge are binned exactly in Python
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


def equal_width(edges: Sequence[float]) -> bool:
    """Edges as the schema makes them (lower + width · k): arithmetic binning applies."""
    widths = np.diff(np.asarray(edges, dtype=float))
    return bool(np.allclose(widths, widths[0], rtol=1e-9, atol=0))


class SqlPlan:
    """Builds the statement of an AggregateQuery over one table and reads its result rows.

    Every statement returns rows (g, c, b, n, s1, s2): the raw group value (or 0), the cell
    (a raw category value, a bin or candidate index), a boundary value to bin exactly (or
    NULL), the record count, and the lattice sums of a moments query (else NULL).
    """

    def __init__(self, tbl: Any, kinds: dict[str, StorageKind],
                 weight: str | None = None) -> None:
        self.table = tbl
        self.kinds = kinds
        self.weight = weight  # a column of record counts (precomputed tables), else None

    # ---- public ----------------------------------------------------------------------
    def statement(self, query: AggregateQuery):
        inner = self._inner(query).subquery("rows")
        keys = [inner.c.g, inner.c.c, inner.c.b]
        w = inner.c.w if self.weight is not None else None
        if query.kind is AggregateKind.MOMENTS:
            sums = [func.sum(inner.c.s1 if w is None else inner.c.s1 * w)]
            sums.append((func.sum(inner.c.s2 if w is None else inner.c.s2 * w))
                        if query.squares else _NULL)
        else:
            sums = [_NULL, _NULL]
        n = func.count() if w is None else func.sum(w)
        return (select(*keys, n.label("n"), sums[0].label("s1"),
                       sums[1].label("s2")).group_by(*keys))

    def result(self, query: AggregateQuery, rows: Sequence[Sequence[Any]]):
        """The aggregate dataclass from the statement's rows."""
        gmap = self._positions(query, query.group, query.group_keys) if query.group else None
        cmap = (self._positions(query, query.column, query.categories)
                if query.kind is AggregateKind.CELLS and query.categories is not None else None)
        edges = query.edges_array() if query.edges is not None and query.kind is \
            AggregateKind.CELLS and query.column is not None else None
        shape = (query.n_groups, query.n_cells)
        counts = np.zeros(shape, dtype=np.int64)
        sums = np.zeros((2, query.n_groups))
        for g, c, b, n, s1, s2 in rows:
            gi = 0 if gmap is None else gmap(g)
            if gi is None:
                continue
            if query.kind is AggregateKind.MOMENTS:
                counts[gi, 0] += int(n)
                sums[0, gi] += float(int(s1))
                sums[1, gi] += float(int(s2)) if query.squares else 0.0
                continue
            if cmap is not None:
                ci = cmap(c)
            elif edges is not None and b is not None:
                ci = int(_edge_index(edges)(np.array([float(b)]))[0])
            else:
                ci = min(max(int(c), 0), shape[1] - 1)
            if ci is not None:
                counts[gi, ci] += int(n)
        if query.kind is AggregateKind.MOMENTS:
            return MomentSums(float(query.lower), float(query.upper), counts[:, 0].astype(float),
                              sums[0], sums[1] if query.squares else None)
        if query.kind is AggregateKind.CANDIDATES:
            return CandidateCounts(float(query.lower), float(query.upper),
                                   int(query.n_candidates), counts)
        return CellCounts(counts)

    # ---- statements ----------------------------------------------------------------------
    def _inner(self, query: AggregateQuery):
        """SELECT g, c, b[, s1, s2] FROM table WHERE every read column is present."""
        g = self._col(query.group) if query.group is not None else _int(0)
        b: ColumnElement = _NULL
        extra: list[ColumnElement] = []
        if query.kind is AggregateKind.MOMENTS:
            c: ColumnElement = _NULL
            extra = self._lattice(query)
        elif query.kind is AggregateKind.CANDIDATES:
            c = self._candidate_cell(query)
        elif query.column is None:
            c = _int(0)
        elif query.categories is not None:
            c = self._col(query.column)
        elif equal_width(query.edges):
            c, b = self._bin_arithmetic(query)
        else:
            c = self._edge_search(self._number(query.column), query.edges)
        cols = [g.label("g"), c.label("c"), b.label("b"), *extra]
        if self.weight is not None:
            cols.append(self._col(self.weight).label("w"))
        return select(*cols).select_from(self.table).where(*self._present(query))

    def _lattice(self, query: AggregateQuery) -> list[ColumnElement]:
        lower, upper = float(query.lower), float(query.upper)
        mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
        grid, _ = lattice_plan(lower, upper, query.squares)
        centred = self._clamped(query) - _double(mid)
        terms = [cast(rint(centred * _double(1.0 / grid["sum"])), BigInteger).label("s1")]
        if query.squares:
            sq = (centred * centred - _double(half * half / 2.0)) * _double(1.0 / grid["sumsq"])
            terms.append(cast(rint(sq), BigInteger).label("s2"))
        else:
            terms.append(_NULL.label("s2"))
        return terms

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
        for name, labels in self._listed(query):
            if query.rules_for(name).other_level in labels:
                continue  # the catch-all level takes every other present value
            col, kind = self._col(name), self.kinds[name]
            values = [v for v in (typed_value(lab, kind) for lab in labels) if v is not None]
            conds.append(or_(*[col == _typed(v, kind) for v in values]) if values else false())
        return conds

    @staticmethod
    def _listed(query: AggregateQuery) -> list[tuple[str, Sequence[str]]]:
        """Columns whose values must be in a public list: the group, a category column."""
        out = []
        if query.group is not None:
            out.append((query.group, query.group_keys))
        if query.kind is AggregateKind.CELLS and query.categories is not None:
            out.append((query.column, query.categories))
        return out

    def _positions(self, query: AggregateQuery, name: str, labels: Sequence[str]):
        """Raw stored value -> position in the public ``labels`` (or the catch-all level)."""
        kind = self.kinds[name]
        table_ = {typed_value(lab, kind): i for i, lab in enumerate(labels)}
        table_.pop(None, None)
        other = query.rules_for(name).other_level
        fallback = list(labels).index(other) if other in labels else None

        def position(value: object) -> int | None:
            if isinstance(value, bool) and kind is not StorageKind.BOOL:
                return fallback
            return table_.get(value, fallback)

        return position

    def _bin_arithmetic(self, query: AggregateQuery) -> tuple[ColumnElement, ColumnElement]:
        """(floor(p), the value itself when it lies within EDGE_MARGIN of an edge)."""
        edges = [float(e) for e in query.edges]
        first, last, nb = edges[0], edges[-1], len(edges) - 1
        x = self._number(query.column)
        inside = case((x < _double(first), _double(first)), (x > _double(last), _double(last)),
                      else_=x)
        p = (inside - _double(first)) * _double(nb / (last - first))
        frac = p - func.floor(p)
        near = or_(frac < _double(EDGE_MARGIN), frac > _double(1.0 - EDGE_MARGIN))
        return cast(func.floor(p), BigInteger), case((near, x), else_=cast(null(), Double()))

    def _edge_search(self, x: ColumnElement, edges: Sequence[float]) -> ColumnElement:
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
    """A source whose aggregates are SQL statements run by the engine holding the data."""

    _plan: SqlPlan

    _kinds: dict[str, StorageKind]

    def storage_kinds(self) -> dict[str, StorageKind]:
        return dict(self._kinds)

    def _fetch(self, stmt) -> list[Sequence[Any]]:
        raise NotImplementedError

    def aggregate(self, query: AggregateQuery):
        self.check_columns(query.columns)
        return self._plan.result(query, self._fetch(self._plan.statement(query)))

    def row_count(self) -> int:
        return int(self._fetch(select(func.count()).select_from(self._plan.table))[0][0])

    def _one(self, query: AggregateQuery):
        return self.aggregate(query)

    cell_counts = moment_sums = candidate_counts = _one


def typed_rows(frame: pd.DataFrame, kinds: dict[str, StorageKind], *,
               floats: bool = False) -> pd.DataFrame:
    """Read rows in the in-memory loader's nullable types (Int64, boolean; float64 too when
    ``floats``: a driver that returns decimals)."""
    types = {StorageKind.INT: "Int64", StorageKind.BOOL: "boolean"}
    if floats:
        types[StorageKind.FLOAT] = "float64"
    for name in frame.columns:
        dtype = types.get(kinds.get(str(name), StorageKind.OTHER))
        if dtype is not None:
            frame[name] = frame[name].astype(dtype)
    return frame


def _typed(value: object, kind: StorageKind) -> ColumnElement:
    if kind is StorageKind.FLOAT:
        return _double(value)  # type: ignore[arg-type]
    if kind is StorageKind.INT:
        return _int(value)  # type: ignore[arg-type]
    return literal(value)
