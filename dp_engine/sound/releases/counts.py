"""Counts and histograms from ``CellCounts``: discrete Laplace per cell, rounded, clamped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dp_engine.errors import DataTypeError, UnknownQueryError
from dp_engine.rng import RngLike, as_generator
from dp_engine.sound.accuracy import dlap_abs_mean, dlap_half_width
from dp_engine.sound.aggregates import CellCounts
from dp_engine.sound.pilot import GroupScales
from dp_engine.sound.release import Release
from dp_engine.sound.releases.common import (
    BUILD_LEVEL,
    base_params,
    check_keys,
    check_n,
    check_public,
    group_epsilons,
    noise_rows,
    per_group_value,
    public_from_params,
    public_params,
    total_epsilon,
    withheld_flags,
)
from dp_engine.sound.statistic import Statistic


def release_counts(cells: CellCounts, epsilon: Any, *, rng: RngLike = None,
                   statistic: str = "histogram", bins: Any = None,
                   group_keys: Sequence[Any] | None = None, n_estimate: Any = None,
                   public: GroupScales | None = None) -> Release:
    """DP counts per (group, cell): discrete Laplace of scale k/ε_g, rounded, clamped ≥ 0.

    ``statistic`` "histogram" (value (cells,) or (groups, cells)) or "count" (one cell per
    group: an int, or (groups,)). ``n_estimate``: public group sizes for the relative error
    (scale n̂_g/cells); without it the release's own counts are used (post-processing).
    ``public`` (sizes and a pilot on the same edges as ``bins``) also accounts for the
    clamp at 0, which makes nearly empty cells less wrong (``count_cell_error``).
    """
    counts = np.asarray(cells.counts)
    if counts.ndim != 2:
        raise DataTypeError("Cell counts must have shape (groups, cells).")
    if not Statistic.of(statistic).counts:
        raise UnknownQueryError(f"Counts are released as a histogram or a count, not {statistic}.")
    g = counts.shape[0]
    keys = check_keys(group_keys, g)
    eps, per_group = group_epsilons(epsilon, g)
    k = int(cells.contribution)
    t = k / eps
    gen = as_generator(rng)
    raw = noise_rows(counts, t, gen)
    params = base_params(eps, per_group, k, keys)
    params["grid"] = {"count": 1.0}
    params["epsilon_split"] = {"count": per_group_value(eps, per_group)}
    if bins is not None:
        params.update(_params_bins(bins))
    if public is not None:
        check_public(public, g)
        params["n_estimate"] = public.n_hat.tolist()
        if same_edges(public, bins, counts.shape[1]):
            params["public"] = public_params(public)
    elif n_estimate is not None:
        params["n_estimate"] = check_n(n_estimate, g)
    noisy = {"count": raw}
    scales = {"count": per_group_value(t, per_group)}
    return finish_counts(statistic, noisy, scales, params, eps if per_group else float(eps[0]),
                         grouped=keys is not None, withheld=withheld_flags(eps, per_group))


def same_edges(public: GroupScales, bins: Any, cells: int) -> bool:
    """True when the pilot's cells are the histogram's bins."""
    if not (isinstance(bins, np.ndarray) and bins.dtype.kind in "iuf"):
        return False
    return bins.size == cells + 1 == public.edges.size and bool(
        np.allclose(np.asarray(bins, dtype=float), public.edges))


def count_cell_error(t: Any, expected_count: Any) -> np.ndarray:
    """E|max(c + Z, 0) − c| for discrete Laplace Z of scale t and a cell of c records.

    = E|Z| − a^(c+1)/((1 + a)(1 − a)), a = e^(−1/t): the clamp at 0 halves the error of an
    empty cell. ``expected_count`` may be fractional (a public estimate).
    """
    t = np.asarray(t, dtype=float)
    c = np.maximum(np.asarray(expected_count, dtype=float), 0.0)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        a = np.exp(-1.0 / t)
        out = 2.0 * a / (1.0 - a * a) - a ** (c + 1.0) / ((1.0 + a) * (1.0 - a))
    return np.where(1.0 / t > 700, 0.0, out)


def _params_bins(bins: Any) -> dict[str, Any]:
    if isinstance(bins, np.ndarray) and bins.dtype.kind in "iuf":
        return {"bin_kind": "edges", "bins": np.asarray(bins, dtype=float).tolist()}
    return {"bin_kind": "categories", "bins": list(bins)}


def finish_counts(statistic: str, noisy: Mapping[str, Any], scales: Mapping[str, Any],
                  params: Mapping[str, Any], eps: Any, *, grouped: bool | None = None,
                  withheld: Any = False) -> Release:
    """Post-process noisy counts (also used by ``refine``)."""
    raw = np.asarray(noisy["count"], dtype=float)
    raw2 = raw.reshape(raw.shape[0] if raw.ndim == 2 else 1, -1)
    g, cells = raw2.shape
    if grouped is None:
        grouped = "group_keys" in params
    one_scale = np.ndim(scales["count"]) == 0
    t = np.asarray(scales["count"], dtype=float) if one_scale else \
        np.asarray(scales["count"], dtype=float).reshape(g, 1)
    finite = np.isfinite(raw2)
    live = finite.all(axis=1)
    rounded = np.maximum(np.where(finite, raw2, 0.0), 0.0)
    err = dlap_abs_mean(t) + np.zeros(raw2.shape)
    hw = dlap_half_width(t, BUILD_LEVEL)
    low, high = np.maximum(rounded - hw, 0.0), rounded + hw
    public = public_from_params(params)
    if public is not None:
        err = count_cell_error(t, public.n_hat[:, None] * public.shape)
    if params.get("n_estimate") is not None:
        scale = np.broadcast_to(np.asarray(params["n_estimate"], dtype=float), (g,)) / cells
    else:
        scale = rounded.mean(axis=1)
    positive = scale > 0
    rel = np.divide(100.0 * err.mean(axis=1), scale, out=np.full(g, np.inf), where=positive)
    if live.all():
        value: Any = rounded.astype(np.int64)
    else:
        value = np.where(live[:, None], rounded, np.nan)
        err, low, high = (np.where(live[:, None], a, np.nan) for a in (err, low, high))
        rel = np.where(live, rel, np.nan)
    eps_total = total_epsilon(np.atleast_1d(np.asarray(eps, dtype=float)))
    expected: Any
    if statistic == Statistic.COUNT and not grouped:
        value, low, high = int(value[0, 0]), float(low[0, 0]), float(high[0, 0])
        expected, rel_out = float(err[0, 0]), float(rel[0])
    elif statistic == Statistic.COUNT:
        value, low, high, expected, rel_out = value[:, 0], low[:, 0], high[:, 0], err[:, 0], rel
    elif not grouped:
        value, low, high, expected, rel_out = value[0], low[0], high[0], np.array(err[0]), \
            float(rel[0])
    else:
        expected, rel_out = np.array(err), rel
    out_params = dict(params)
    out_params["error_scale"] = (
        "public group size n̂/cells" if params.get("n_estimate") is not None
        else "this release's mean cell count"
    ) + (" (clamp at 0 from the public pilot)" if public is not None else "")
    return Release(
        statistic=statistic, value=value, epsilon=eps_total,
        mechanism="discrete Laplace (rounded, clamped at 0)",
        sensitivity=float(params.get("contribution", 1)), params=out_params,
        expected_error=expected, ci_low=low, ci_high=high,
        noisy={"count": raw}, scales=dict(scales), withheld=withheld,
        expected_relative_error=rel_out,
    )


