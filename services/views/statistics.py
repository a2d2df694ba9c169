"""Public labels of an Explore view; and the rows paper mode reads (owner only).

Sound mode never reads rows: it is released from the data source's aggregates
(services/views/plans.py). Paper mode (PyDPLib's per-record noise) needs rows: ``inputs``
reads them from a capped row sample (``services.data.sources.resolve.read_rows``), and
``Inputs.note`` says when that sample is not the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from dp_engine.schema import ColumnSpec, Schema
from services.data.sources.labels import canonical_label as label
from services.data.sources.query import categorical_histogram

if TYPE_CHECKING:
    from services.views.queries import ViewRequest

ALL = "All patients"


def labels(column: pd.Series) -> np.ndarray:
    """``label`` of every value, computed once per distinct value (factorize, then take)."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    names = np.asarray([label(u) for u in uniques] + [""], dtype=object)
    return names[codes]          # code -1 (missing) -> "", already dropped by the caller


def histogram_bins(spec: ColumnSpec) -> tuple[np.ndarray | list[str], list[str]]:
    """Public bins of a histogram of ``spec``: (numeric edges or category labels, labels)."""
    if categorical_histogram(spec):
        cats = [label(c) for c in spec.category_list()]
        return cats, list(cats)
    edges = spec.bin_edges()
    return edges, [f"{label(lo)}–{label(hi)}" for lo, hi in zip(edges[:-1], edges[1:],
                                                                   strict=True)]


def group_keys(spec: ColumnSpec | None) -> list[str]:
    """Public group labels (from the schema), [ALL] when ungrouped."""
    return [ALL] if spec is None else [label(c) for c in spec.category_list()]


@dataclass(frozen=True)
class Inputs:
    """The arrays one request needs, missing rows dropped (a missing value = not present)."""

    values: np.ndarray           # float values, or text labels for a categorical histogram
    groups: np.ndarray | None    # text labels, or None
    group_keys: list[str]        # public group labels (from the schema), [ALL] when ungrouped
    bins: np.ndarray | list[str]  # numeric edges or public category labels (histogram)
    x_spec: ColumnSpec
    note: str = ""               # set when the rows are a sample of a larger table

    @property
    def categorical_x(self) -> bool:
        return isinstance(self.bins, list)

    def masks(self) -> list[np.ndarray]:
        """One boolean row mask per group, in ``group_keys`` order."""
        if self.groups is None:
            return [np.ones(len(self.values), dtype=bool)]
        return [self.groups == k for k in self.group_keys]


def inputs(req: ViewRequest, frame: pd.DataFrame, schema: Schema, *, histogram: bool,
           note: str = "") -> Inputs:
    """Read the measured (and group) column of ``req`` from ``frame`` (paper mode's rows)."""
    x_spec = schema.column(req.x)
    g_spec = schema.column(req.group) if req.group else None
    cols = [req.x] + ([req.group] if req.group else [])
    sub = frame[cols].dropna()
    groups = labels(sub[req.group]) if g_spec is not None else None
    bins: np.ndarray | list[str] = []
    if histogram:
        bins, _ = histogram_bins(x_spec)
    if histogram and categorical_histogram(x_spec):
        values = labels(sub[req.x])
    else:
        values = pd.to_numeric(sub[req.x], errors="coerce").to_numpy(dtype=float)
    return Inputs(values, groups, group_keys(g_spec), bins, x_spec, note)


def row_counts(inp: Inputs) -> np.ndarray:
    """True counts per (group, bin) of paper mode's rows (it noises them per cell)."""
    rows = []
    for mask in inp.masks():
        v = inp.values[mask]
        if inp.categorical_x:
            counts = dict(zip(*np.unique(v.astype(str), return_counts=True), strict=True))
            rows.append([float(counts.get(b, 0)) for b in inp.bins])
        else:
            edges = np.asarray(inp.bins, dtype=float)
            clipped = np.clip(v.astype(float), edges[0], edges[-1])
            rows.append(np.histogram(clipped, bins=edges)[0].astype(float))
    return np.asarray(rows, dtype=float)


def as_grid(value: object, n_groups: int) -> np.ndarray:
    """Shape any release value as (groups, cells)."""
    return np.asarray(value, dtype=float).reshape(n_groups, -1)
