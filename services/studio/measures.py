"""How a released copy compares with the original: the metrics of every released column
(owner only: they read the original), and their JSON form for pages and reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from dp_engine.release import ColumnChoice, TableMetrics, table_metrics
from dp_engine.release.techniques import Technique
from dp_engine.schema import NUMERIC_KINDS, ColumnKind, Schema


def metric_kind(schema: Schema, choice: ColumnChoice) -> str:
    """How a released column is measured: "numeric", "categorical" or "text"."""
    t = choice.technique
    if t.numeric:
        return "numeric"
    if t.categorical:
        return "categorical"
    if t is Technique.KEEP:
        spec = schema.column(choice.name)
        if spec.kind is ColumnKind.BOOLEAN or spec.kind is ColumnKind.CATEGORICAL:
            return "categorical"
        if spec.kind in NUMERIC_KINDS and spec.has_bounds:
            return "numeric"
    return "text"


def categories_of(schema: Schema, name: str) -> tuple:
    spec = schema.column(name)
    if spec.kind is ColumnKind.BOOLEAN and not spec.categories:
        return (False, True)
    return tuple(spec.categories or ())


def measure(original: pd.DataFrame, copy: pd.DataFrame, schema: Schema,
            choices: Sequence[ColumnChoice]) -> TableMetrics:
    """Every metric of the released columns (owner only: reads the original)."""
    released = [c for c in choices if c.name in copy.columns]
    kinds = {c.name: metric_kind(schema, c) for c in released}
    cats = {c.name: categories_of(schema, c.name) for c in released}
    return table_metrics(original, copy, kinds, categories=cats)


def metrics_dict(m: TableMetrics) -> dict[str, Any]:
    """Metrics as JSON-able data (owner only: they compare with the original)."""
    return {"columns": {k: v.to_dict() for k, v in m.columns.items()},
            "overall": {name: m.overall(name) for name in
                        ("privacy_match", "digimatch", "privacy_error")},
            "corr_names": list(m.corr_names), "corr_original": m.corr_original.tolist(),
            "corr_dp": m.corr_dp.tolist(), "corr_max_diff": m.corr_max_diff,
            "corr_mean_diff": m.corr_mean_diff}
