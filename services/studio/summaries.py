"""What the Release page draws of a run, computed once on the server (never raw rows).

Figures and their table alternatives are built from these small summaries: histogram counts
on the column's public bins, five-number boxes, category shares (from the metrics) and the
correlation matrices. The original side is included only when ``include_original`` (the
owner, who alone runs per-record copies).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dp_engine.errors import DPError
from dp_engine.release.synthetic import SynthDomain
from dp_engine.schema import Schema

QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


def _numbers(values: Any) -> np.ndarray:
    x = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float,
                                                                   na_value=np.nan)
    return x[np.isfinite(x)]


def _counts(x: np.ndarray, edges: np.ndarray) -> list[int]:
    """Counts on the public bins; values outside the bounds fall in the end bins."""
    if not len(x):
        return [0] * (len(edges) - 1)
    clipped = np.clip(x, edges[0], edges[-1])
    return [int(c) for c in np.histogram(clipped, bins=edges)[0]]


def _box(x: np.ndarray) -> list[float] | None:
    return [float(v) for v in np.quantile(x, QUANTILES)] if len(x) else None


def numeric_summary(original: Any, dp: Any, edges: np.ndarray,
                    include_original: bool) -> dict[str, Any]:
    xo, xd = _numbers(original), _numbers(dp)
    out: dict[str, Any] = {"edges": [float(e) for e in edges], "counts_dp": _counts(xd, edges),
                           "box_dp": _box(xd)}
    if include_original:
        out |= {"counts_original": _counts(xo, edges), "box_original": _box(xo)}
    return out


def run_summaries(original: pd.DataFrame, copy: pd.DataFrame, schema: Schema,
                  metrics: Mapping[str, Any], *, include_original: bool) -> dict[str, Any]:
    """Per released column: what its figures show. ``metrics``: ``metrics_dict`` of the run."""
    columns: dict[str, Any] = {}
    for name, m in metrics["columns"].items():
        spec = schema.column(name)
        item: dict[str, Any] = {"label": spec.display, "kind": m["kind"]}
        if m["kind"] == "numeric":
            try:
                edges = spec.bin_edges()
            except DPError:
                continue
            item |= numeric_summary(original[name], copy[name], edges, include_original)
        elif m["kind"] == "categorical":
            item["shares_dp"] = dict(m.get("shares_dp") or {})
            if include_original:
                item["shares_original"] = dict(m.get("shares_original") or {})
        columns[name] = item
    corr = {"names": [schema.column(n).display for n in metrics.get("corr_names", [])],
            "dp": _finite(metrics.get("corr_dp", []))}
    if include_original:
        corr["original"] = _finite(metrics.get("corr_original", []))
    return {"columns": columns, "corr": corr}


def _finite(matrix: Any) -> list[list[float | None]]:
    return [[float(v) if v is not None and math.isfinite(float(v)) else None for v in row]
            for row in matrix]


def synthetic_summaries(frame: pd.DataFrame, schema: Schema,
                        domain: SynthDomain) -> dict[str, Any]:
    """Per synthesized column: bins and box (numeric) or shares (categories) of the
    SYNTHETIC table only (DP: any role may see them; nothing here reads the original)."""
    columns: dict[str, Any] = {}
    for attr in domain.attributes:
        spec = schema.column(attr.name)
        item: dict[str, Any] = {"label": spec.display, "dp_label": "Synthetic copy"}
        if attr.edges is not None:
            item |= numeric_summary((), frame[attr.name], np.asarray(attr.edges), False)
            item["kind"] = "numeric"
        else:
            values = frame[attr.name].dropna().astype(str)
            cats = [str(c) for c in (spec.categories or (False, True))]
            total = max(len(values), 1)
            item |= {"kind": "categorical",
                     "shares_dp": {c: float((values == c).sum()) / total for c in cats}}
        columns[attr.name] = item
    return {"columns": columns, "corr": {"names": [], "dp": []}}
