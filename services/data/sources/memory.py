"""In-memory source: a pandas frame (small uploads, the sample), via the numpy reference.

It prepares the columns the way every SQL source does in its query (declared missing codes
and labels outside the public list become missing, or the catch-all level), then calls the
reference functions of ``dp_engine.sound.aggregates`` unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dp_engine.sound import aggregates as ref
from services.data.sources.base import ROW_CAP, DataSource, RowSample
from services.data.sources.labels import StorageKind, canonical_label, code_value
from services.data.sources.query import AggregateQuery, ColumnRules


def storage_kind(dtype) -> StorageKind:
    """How a pandas dtype stores values."""
    if pd.api.types.is_bool_dtype(dtype):
        return StorageKind.BOOL
    if pd.api.types.is_integer_dtype(dtype):
        return StorageKind.INT
    if pd.api.types.is_float_dtype(dtype):
        return StorageKind.FLOAT
    if pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype) \
            or isinstance(dtype, pd.CategoricalDtype):
        return StorageKind.TEXT
    return StorageKind.OTHER


class PandasSource(DataSource):
    """A DataSource over a DataFrame held by this process."""

    backend = "in-memory"
    bounds_contributions = True

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def storage_kinds(self) -> dict[str, StorageKind]:
        return {str(c): storage_kind(t) for c, t in self.frame.dtypes.items()}

    # ---- aggregates ------------------------------------------------------------------
    def cell_counts(self, query: AggregateQuery) -> ref.CellCounts:
        keep = self._required(query)
        if query.column is None:
            values: np.ndarray = np.where(keep, 0.0, np.nan)
            bins: object = np.array([0.0, 1.0])
        elif query.categories is not None:
            values = self._labels(query.column, query.categories, query, keep)
            bins = list(query.categories)
        else:
            values = self._numbers(query.column, query, keep)
            bins = query.edges_array()
        return ref.cell_counts(values, bins, **self._groups(query, keep), **self._bound(query))

    def moment_sums(self, query: AggregateQuery) -> ref.MomentSums:
        keep = self._required(query)
        values = self._numbers(query.column, query, keep)
        return ref.moment_sums(values, query.lower, query.upper, squares=query.squares,
                               **self._groups(query, keep), **self._bound(query))

    def candidate_counts(self, query: AggregateQuery) -> ref.CandidateCounts:
        keep = self._required(query)
        values = self._numbers(query.column, query, keep)
        return ref.candidate_counts(values, query.lower, query.upper, query.n_candidates,
                                    **self._groups(query, keep), **self._bound(query))

    # ---- rows --------------------------------------------------------------------------
    def row_count(self) -> int:
        return len(self.frame)

    def read_rows(self, columns: Sequence[str], *, cap: int = ROW_CAP,
                  seed: int = 0) -> RowSample:
        self.check_columns(columns)
        sub = self.frame[list(columns)]
        if len(sub) <= cap:
            return RowSample(sub, False, cap)
        picked = np.sort(np.random.default_rng(seed).choice(len(sub), size=cap, replace=False))
        return RowSample(sub.iloc[picked].reset_index(drop=True), True, cap)

    # ---- preparing columns ---------------------------------------------------------------
    def _codes_mask(self, name: str, rules: ColumnRules) -> np.ndarray:
        """True where the cell holds a declared missing-value code."""
        col = self.frame[name]
        kind = storage_kind(col.dtype)
        codes = [v for v in (code_value(c, kind) for c in rules.missing_codes) if v is not None]
        if not codes:
            return np.zeros(len(col), dtype=bool)
        return col.isin(codes).to_numpy(dtype=bool, na_value=False)

    def _required(self, query: AggregateQuery) -> np.ndarray:
        """Records whose ``require`` columns are present (codes count as missing)."""
        keep = np.ones(len(self.frame), dtype=bool)
        for name in query.require:
            keep &= self.frame[name].notna().to_numpy()
            keep &= ~self._codes_mask(name, query.rules_for(name))
            if storage_kind(self.frame[name].dtype) is StorageKind.FLOAT:
                keep &= ~np.isnan(self.frame[name].to_numpy(dtype=float, na_value=np.nan))
        return keep

    def _numbers(self, name: str, query: AggregateQuery, keep: np.ndarray) -> np.ndarray:
        values = self.frame[name].to_numpy(dtype=float, na_value=np.nan).copy()
        values[~keep | self._codes_mask(name, query.rules_for(name))] = np.nan
        return values

    def _labels(self, name: str, public: Sequence[str], query: AggregateQuery,
                keep: np.ndarray) -> np.ndarray:
        """Canonical label per record; None where missing, a code, or outside ``public``."""
        rules = query.rules_for(name)
        codes, uniques = pd.factorize(self.frame[name], use_na_sentinel=True)
        allowed = set(public)
        other = rules.other_level if rules.other_level in allowed else None
        names = [canonical_label(u) for u in uniques]
        names = [n if n in allowed else other for n in names]
        out = np.asarray([*names, None], dtype=object)[codes]
        out[~keep | self._codes_mask(name, rules)] = None
        return out

    def _bound(self, query: AggregateQuery) -> dict:
        """At most k rows per patient (``aggregates.bound_contributions``), when asked."""
        if query.patient is None:
            return {}
        return {"patients": self.frame[query.patient], "max_rows_per_patient": query.max_rows}

    def _groups(self, query: AggregateQuery, keep: np.ndarray) -> dict:
        if query.group is None:
            return {}
        labels = self._labels(query.group, query.group_keys, query, keep)
        return {"groups": labels, "group_keys": list(query.group_keys)}
