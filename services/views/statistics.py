"""Turn a validated Explore request into engine calls (sound and paper mode) and true values.

This is the only place that reads a dataset's rows for the Explore page. The rows never
leave the server: the results are DP releases; the true values are used for the owner's
realized-noise figure only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dp_engine import paper, sound
from dp_engine.schema import NUMERIC_KINDS, ColumnKind, ColumnSpec, Schema
from services.views.queries import BOX_QS, ViewRequest

ALL = "All patients"


def label(value: object) -> str:
    """One canonical text label for a category, whatever its storage type."""
    if isinstance(value, bool | np.bool_):
        return "Yes" if value else "No"
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def labels(column: pd.Series) -> np.ndarray:
    """``label`` of every value, computed once per distinct value (factorize, then take)."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    names = np.asarray([label(u) for u in uniques] + [""], dtype=object)
    return names[codes]          # code -1 (missing) -> "", already dropped by the caller


@dataclass(frozen=True)
class Inputs:
    """The arrays one request needs, missing rows dropped (a missing value = not present)."""

    values: np.ndarray           # float values, or text labels for a categorical histogram
    groups: np.ndarray | None    # text labels, or None
    group_keys: list[str]        # public group labels (from the schema), [ALL] when ungrouped
    bins: np.ndarray | list[str]  # numeric edges or public category labels (histogram)
    bin_labels: list[str]
    x_spec: ColumnSpec
    g_spec: ColumnSpec | None

    @property
    def categorical_x(self) -> bool:
        return isinstance(self.bins, list)


def _edge_labels(edges: np.ndarray) -> list[str]:
    return [f"{label(lo)}–{label(hi)}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def categorical_histogram(spec: ColumnSpec) -> bool:
    return spec.kind not in NUMERIC_KINDS or (
        spec.kind is ColumnKind.ORDINAL and spec.categories is not None
    )


def inputs(req: ViewRequest, frame: pd.DataFrame, schema: Schema) -> Inputs:
    x_spec = schema.column(req.x)
    g_spec = schema.column(req.group) if req.group else None
    cols = [req.x] + ([req.group] if req.group else [])
    sub = frame[cols].dropna()
    groups = None
    keys = [ALL]
    if g_spec is not None:
        keys = [label(c) for c in g_spec.category_list()]
        groups = labels(sub[req.group])
    if req.view == "histogram" and categorical_histogram(x_spec):
        bins: np.ndarray | list[str] = [label(c) for c in x_spec.category_list()]
        bin_labels = list(bins)
        values = labels(sub[req.x])
    else:
        values = pd.to_numeric(sub[req.x], errors="coerce").to_numpy(dtype=float)
        if req.view == "histogram":
            bins = x_spec.bin_edges()
            bin_labels = _edge_labels(bins)
        else:
            bins, bin_labels = [], []
    return Inputs(values, groups, keys, bins, bin_labels, x_spec, g_spec)


def sound_release(req: ViewRequest, inp: Inputs, epsilon: float,
                  rng: np.random.Generator | None, n_hat: int) -> sound.Release:
    """The central-DP release of one view at ``epsilon``.

    Box plots label their error with the public size estimate n̂/groups (the exponential
    mechanism releases no count of its own); means and variances use their own noisy count.
    """
    grouped = inp.groups is not None
    if req.view == "histogram":
        if grouped:
            return sound.grouped_histogram(inp.values, inp.groups, inp.bins, inp.group_keys,
                                           epsilon, rng=rng)
        return sound.histogram(inp.values, inp.bins, epsilon, rng=rng)
    lo, hi = inp.x_spec.bounds()
    if req.view == "median":
        n_est = max(n_hat / len(inp.group_keys), 1.0)
        if grouped:
            return sound.grouped_quantiles(inp.values, inp.groups, inp.group_keys, lo, hi,
                                           epsilon, qs=BOX_QS, rng=rng,
                                           n_estimate=[n_est] * len(inp.group_keys))
        return sound.quantiles(inp.values, lo, hi, epsilon, qs=BOX_QS, rng=rng,
                               n_estimate=n_est)
    fn = {"mean": (sound.mean, sound.grouped_mean),
          "variance": (sound.variance, sound.grouped_variance)}[req.view]
    if grouped:
        return fn[1](inp.values, inp.groups, inp.group_keys, lo, hi, epsilon, rng=rng)
    return fn[0](inp.values, lo, hi, epsilon, rng=rng)


def as_grid(value: object, n_groups: int) -> np.ndarray:
    """Shape any release value as (groups, cells)."""
    arr = np.asarray(value, dtype=float)
    return arr.reshape(n_groups, -1)


def true_values(req: ViewRequest, inp: Inputs) -> np.ndarray:
    """The un-noised statistic, shaped (groups, cells). Owner-only use (realized noise)."""
    masks = ([np.ones(len(inp.values), dtype=bool)] if inp.groups is None
             else [inp.groups == k for k in inp.group_keys])
    rows = []
    for m in masks:
        v = inp.values[m]
        if req.view == "histogram":
            if inp.categorical_x:
                counts = pd.Series(v).value_counts()
                rows.append([float(counts.get(b, 0)) for b in inp.bins])
            else:
                edges = np.asarray(inp.bins, dtype=float)
                clipped = np.clip(v.astype(float), edges[0], edges[-1])
                rows.append(np.histogram(clipped, bins=edges)[0].astype(float))
            continue
        lo, hi = inp.x_spec.bounds()
        v = np.clip(v.astype(float), lo, hi)
        if v.size == 0:
            rows.append([np.nan] * (len(BOX_QS) if req.view == "median" else 1))
        elif req.view == "mean":
            rows.append([float(v.mean())])
        elif req.view == "variance":
            rows.append([float(v.var())])
        else:
            rows.append(list(np.quantile(v, BOX_QS)))
    return np.asarray(rows, dtype=float)


def realized_noise_percent(req: ViewRequest, inp: Inputs, dp: np.ndarray, truth: np.ndarray,
                           n_hat: int) -> float | None:
    """Mean |dp − true| on the same scale as the calibration map, in percent.

    histogram: per cell, over the average cell count n̂/(groups · bins); mean and quantiles:
    over the public width (upper − lower); variance: over the largest variance (width/2)².
    So the owner can compare it directly with the band the ε was calibrated for.
    """
    dp = np.asarray(dp, dtype=float)
    ok = np.isfinite(truth) & np.isfinite(dp)
    if not ok.any():
        return None
    err = float(np.mean(np.abs(dp[ok] - truth[ok])))
    if req.view == "histogram":
        scale = max(n_hat, 1) / (len(inp.group_keys) * max(len(inp.bin_labels), 1))
    else:
        lo, hi = inp.x_spec.bounds()
        scale = (hi - lo) if req.view in ("mean", "median") else ((hi - lo) / 2) ** 2
    return 100.0 * err / scale


PAPER_QUERY = {"histogram": 1, "mean": 2, "median": 3, "variance": 4}


def paper_release(req: ViewRequest, inp: Inputs, noise_factor: int,
                  rng: np.random.Generator | None) -> dict:
    """PyDPLib's per-record noising, shaped like a sound answer (owner only)."""
    groups = inp.groups if inp.groups is not None else np.full(len(inp.values), ALL, dtype=object)
    if req.view == "histogram":
        truth = true_values(req, inp)            # counts computed on raw data, then noised
        res = paper.dp_calculate(truth.ravel(), 1, noise_factor, data_type=int, is_range=True,
                                 rng=rng)
        grid = np.asarray(res.dp_data, dtype=float).reshape(truth.shape)
        return {"values": grid, "epsilon": res.epsilon, "sensitivity": res.sensitivity,
                "noise_percent": res.noise_percent, "effective_epsilon": res.effective_epsilon,
                "found": res.found}
    res = paper.grouped_statistic(
        inp.values, groups, PAPER_QUERY[req.view], noise_factor, data_type=float,
        is_range=True, noise_groups=req.view == "median" and inp.groups is not None,
        group_categories=inp.group_keys, rng=rng,
    )
    return _paper_grid(req, inp, res)


def _paper_grid(req: ViewRequest, inp: Inputs, res: paper.GroupedPaperResult) -> dict:
    keys = [str(k) for k in res.group_keys]
    pos = {k: i for i, k in enumerate(keys)}
    rows = []
    for k in inp.group_keys:
        i = pos.get(k)
        if i is None:
            rows.append([np.nan] * (len(BOX_QS) if req.view == "median" else 1))
        elif req.view == "median":
            q1, med, q3 = (float(res.q1[i]), float(res.values[i]), float(res.q3[i]))
            rows.append([q1, q1, med, q3, q3])   # paper mode releases no whiskers
        else:
            rows.append([float(res.values[i])])
    return {"values": np.asarray(rows, dtype=float), "epsilon": res.epsilon,
            "sensitivity": res.sensitivity, "noise_percent": res.noise_percent,
            "effective_epsilon": res.effective_epsilon, "found": res.value_result.found}
