"""AggregateQuery: which sufficient statistics a release needs, named by public schema facts.

A query holds only public metadata (column names, the public group keys and categories as
canonical labels, histogram edges, clamping bounds, lattice and candidate parameters, the
declared missing-value codes), so it may be logged, cached and sent to a warehouse. The
answers are the aggregate dataclasses of ``dp_engine.sound.aggregates``, whose module
docstring defines every number bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from dp_engine.errors import SchemaError
from dp_engine.schema import NUMERIC_KINDS, ColumnKind, ColumnSpec, Schema
from dp_engine.sound.aggregates import CandidateCounts, CellCounts, MomentSums
from dp_engine.sound.validation import check_bounds
from services.data.sources.labels import canonical_label

Aggregates = CellCounts | MomentSums | CandidateCounts
DEFAULT_CANDIDATES = 1001  # as dp_engine.sound.statistics: a 1001-point grid per quantile


class AggregateKind(StrEnum):
    CELLS = "cells"              # CellCounts: histograms, counts, group sizes
    MOMENTS = "moments"          # MomentSums: means (and variances with squares)
    CANDIDATES = "candidates"    # CandidateCounts: quantiles


@dataclass(frozen=True)
class ColumnRules:
    """How one column's cells become present values: declared codes and a catch-all level."""

    missing_codes: tuple[str, ...] = ()
    other_level: str | None = None   # label every value outside the public list is read as


@dataclass(frozen=True)
class AggregateQuery:
    """One aggregate over public schema things; build it with the class methods below.

    ``column`` None (with kind CELLS) counts records: one cell per group. ``require``
    names further columns that must be present for a record to count (group sizes of a view).
    """

    kind: AggregateKind
    column: str | None = None
    group: str | None = None
    group_keys: tuple[str, ...] = ()          # canonical labels, in public order
    edges: tuple[float, ...] | None = None    # numeric histogram edges
    categories: tuple[str, ...] | None = None  # canonical labels of a categorical histogram
    lower: float | None = None
    upper: float | None = None
    squares: bool = False
    n_candidates: int | None = None
    require: tuple[str, ...] = ()
    rules: tuple[tuple[str, ColumnRules], ...] = field(default=())
    patient: str | None = None                # the patient column, when rows are bounded
    max_rows: int = 1                         # k: most rows of one patient kept

    def bounded(self, patient: str | None, max_rows: int) -> AggregateQuery:
        """This query keeping at most ``max_rows`` rows per patient (``aggregates``' rule)."""
        return self if patient is None else replace(self, patient=patient, max_rows=int(max_rows))

    # ---- construction from the public schema ------------------------------------
    @classmethod
    def histogram(cls, schema: Schema, column: str, group: str | None = None) -> AggregateQuery:
        """Counts per (group, bin): numeric edges, or public categories for category columns."""
        spec = schema.column(column)
        if categorical_histogram(spec):
            cats = tuple(canonical_label(c) for c in spec.category_list())
            return cls._make(schema, AggregateKind.CELLS, column, group, categories=cats)
        edges = tuple(float(e) for e in spec.bin_edges())
        return cls._make(schema, AggregateKind.CELLS, column, group, edges=edges)

    @classmethod
    def count(cls, schema: Schema, group: str | None = None,
              require: tuple[str, ...] = ()) -> AggregateQuery:
        """Records per group (one cell), e.g. the DP count's n or a grouped view's group sizes."""
        for name in require:
            schema.column(name)
        return cls._make(schema, AggregateKind.CELLS, None, group, require=tuple(require))

    @classmethod
    def moments(cls, schema: Schema, column: str, group: str | None = None, *,
                squares: bool = False) -> AggregateQuery:
        """Lattice sums for a mean (``squares`` False) or a variance (True)."""
        lo, hi = _numeric_bounds(schema.column(column))
        return cls._make(schema, AggregateKind.MOMENTS, column, group, lower=lo, upper=hi,
                         squares=bool(squares))

    @classmethod
    def candidates(cls, schema: Schema, column: str, group: str | None = None, *,
                   n_candidates: int = DEFAULT_CANDIDATES) -> AggregateQuery:
        """Counts over the quantile candidate cells of the public range."""
        lo, hi = _numeric_bounds(schema.column(column))
        c = int(n_candidates)
        if c < 2 or c != n_candidates:
            raise SchemaError("The number of quantile candidates must be a whole number ≥ 2.")
        return cls._make(schema, AggregateKind.CANDIDATES, column, group, lower=lo, upper=hi,
                         n_candidates=c)

    @classmethod
    def _make(cls, schema: Schema, kind: AggregateKind, column: str | None,
              group: str | None, **kw: Any) -> AggregateQuery:
        keys: tuple[str, ...] = ()
        if group is not None:
            keys = tuple(canonical_label(c) for c in schema.column(group).category_list())
        if column is not None:
            schema.column(column)
        names = [n for n in (column, group, *kw.get("require", ())) if n is not None]
        rules = tuple((n, column_rules(schema.column(n))) for n in dict.fromkeys(names))
        return cls(kind=kind, column=column, group=group, group_keys=keys,
                   rules=tuple(r for r in rules if r[1] != ColumnRules()), **kw)

    # ---- reading -------------------------------------------------------------------
    @property
    def n_groups(self) -> int:
        return len(self.group_keys) if self.group is not None else 1

    @property
    def n_cells(self) -> int:
        if self.kind is AggregateKind.CANDIDATES:
            return int(self.n_candidates) + 1  # type: ignore[arg-type]
        if self.categories is not None:
            return len(self.categories)
        if self.edges is not None:
            return len(self.edges) - 1
        return 1

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the query reads."""
        names = (self.column, self.group, *self.require, self.patient)
        return tuple(dict.fromkeys(n for n in names if n is not None))

    def rules_for(self, name: str) -> ColumnRules:
        return dict(self.rules).get(name, ColumnRules())

    def edges_array(self) -> np.ndarray:
        return np.asarray(self.edges, dtype=float)


def categorical_histogram(spec: ColumnSpec) -> bool:
    """A histogram over public categories (not numeric bins), as the Explore page draws it."""
    return spec.kind not in NUMERIC_KINDS or (
        spec.kind is ColumnKind.ORDINAL and spec.categories is not None
    )


def column_rules(spec: ColumnSpec) -> ColumnRules:
    """The schema's declared missing codes and catch-all level (absent in older schemas)."""
    codes = tuple(str(c) for c in (getattr(spec, "missing_codes", None) or ()))
    other = getattr(spec, "other_level", None)
    return ColumnRules(codes, None if other is None else canonical_label(other))


def _numeric_bounds(spec: ColumnSpec) -> tuple[float, float]:
    if spec.kind not in NUMERIC_KINDS:
        raise SchemaError(
            f"Column '{spec.label}' is not numeric; use a histogram (counts) for it."
        )
    return check_bounds(*spec.bounds())
