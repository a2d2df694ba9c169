"""Quantiles from ``CandidateCounts``: noisy CDF (default), JointExp or per-level EM.

Each group may have its own candidate grid (chosen from its public size n̂_g): the
aggregates' grid is coarsened exactly per group. For the noisy CDF the noisy tree of every
grid is kept (``noisy["tree<c>"]``, NaN rows for groups on other grids), so a release can
be refined to a noisier tier and post-processed again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from dp_engine.errors import DataTypeError, UnknownQueryError
from dp_engine.rng import RngLike, as_generator
from dp_engine.sound import quantile_mechanisms as qm
from dp_engine.sound.aggregates import CandidateCounts, coarsen
from dp_engine.sound.pilot import GroupScales, uniform_scales
from dp_engine.sound.release import Release
from dp_engine.sound.releases.common import (
    LEVEL,
    base_params,
    check_keys,
    check_n,
    check_public,
    group_epsilons,
    per_group_value,
    public_from_params,
    public_params,
    total_epsilon,
    withheld_flags,
)
from dp_engine.sound.releases.quantile_error import (
    expected_quantile_error,
    uniform_quantile_error,
)
from dp_engine.sound.spread import band_levels, error_scale, relative
from dp_engine.sound.validation import check_qs

MAX_CDF_CANDIDATES = 1001
"""The noisy CDF never uses a finer grid (a step of 1/1000 of the range is below its noise)."""
GRID_WEIGHT = 0.5
"""The grid step counts double when a CDF grid is chosen: finer than the error-optimal grid,
so that the noise, not the grid, sets the error and its interval (docs/accuracy.md)."""
MAX_JOINT_CANDIDATES = 201
"""JointExp costs O(c²) per group."""
CELLS_PER_RECORD = 0.5
"""About n̂·ε/2 cells: a little finer than where the noisy CDF's grid error meets its noise
(bench_accuracy.py), so that the noise, not the grid, sets the error and its interval."""


def _largest_grid(c: int, cap: int) -> int:
    """The largest grid of at most ``cap`` points that a grid of ``c`` points coarsens to."""
    return 1 + max(d for d in range(1, min(cap, c)) if (c - 1) % d == 0)


def candidates_for(n_hat: Any, available: int, method: str = "cdf",
                   epsilon: Any = 1.0) -> np.ndarray:
    """The candidate grid of each group, from public inputs only (its n̂_g and ε_g).

    Noisy CDF: the grid (one the aggregates' grid coarsens to exactly, 10 to 1000 cells)
    with the smallest expected error under evenly spread values
    (``uniform_quantile_error``): a finer grid has a smaller step but a deeper, noisier
    tree. Taking the minimum keeps the labelled error monotone in ε. The exponential
    mechanisms: about n̂_g·ε_g/2 cells, at most 200 (JointExp costs O(c²)). A group without
    a public size or ε gets the available grid. Nested tiers keep the grid of the release
    they refine.
    """
    n = np.atleast_1d(np.asarray(n_hat, dtype=float))
    eps = np.broadcast_to(np.asarray(epsilon, dtype=float), n.shape)
    cap = MAX_CDF_CANDIDATES if method == "cdf" else MAX_JOINT_CANDIDATES
    top = _largest_grid(available, cap) if available > cap else available
    options = [d + 1 for d in range(1, available) if (available - 1) % d == 0 and 10 <= d < top]
    out = np.full(n.shape, top, dtype=int)
    known = np.isfinite(n) & np.isfinite(eps) & (eps > 0)
    if not options or not known.any():
        return out
    if method == "cdf":
        grids, levels, spread = _grid_constants(available, top)
        e = eps[known][:, None]
        a = np.exp(-e / levels[None, :])
        rank = np.sqrt(2.0 * a / (1.0 - a) ** 2) * spread[None, :] * math.sqrt(2 / math.pi)
        err = rank / np.maximum(n[known], 1.0)[:, None] + GRID_WEIGHT / (grids[None, :] - 1)
        out[known] = grids[np.argmin(err, axis=1)]
        return out
    for i in np.flatnonzero(known):
        target = max(n[i] * eps[i] * CELLS_PER_RECORD, 1.0)
        out[i] = min(options, key=lambda c: abs(math.log((c - 1) / target)))
    return out


@lru_cache(maxsize=16)
def _grid_constants(available: int, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per CDF grid option: its size, its tree's noisy levels, and the mean over the box
    levels 25/50/75 % of √(Σ coefficients²) of the rank noise there (see
    ``uniform_quantile_error``, of which this is the vectorized form)."""
    grids = [d + 1 for d in range(1, available) if (available - 1) % d == 0 and 10 <= d < top]
    grids = sorted(set(grids + [top]))
    levels, spread = [], []
    qs = np.array([0.25, 0.5, 0.75])
    for c in grids:
        b = qm.default_branching(c + 1)
        levels.append(qm.TreeShape(c + 1, b).levels)
        pos = np.clip(np.rint(qs * (c - 1)).astype(int), 0, c - 1)
        sum2 = qm.rank_noise_variance(c + 1, b, pos, qs)
        spread.append(float(np.mean(np.sqrt(np.maximum(sum2, 0.0)))))
    return np.asarray(grids), np.asarray(levels, dtype=float), np.asarray(spread)


def release_quantiles(cands: CandidateCounts, epsilon: Any, *,
                      qs: Sequence[float] = (0.25, 0.5, 0.75), rng: RngLike = None,
                      method: str = "cdf", group_keys: Sequence[Any] | None = None,
                      n_estimate: Any = None, public: GroupScales | None = None,
                      n_candidates: Any = None, branching: int | None = None) -> Release:
    """DP quantiles per group from candidate counts.

    ``method``: "cdf" (default: noisy consistent tree CDF; valid 95 % intervals, nestable),
    "joint" (JointExp) or "independent" (exponential mechanism per level, ε/m each); the
    last two give no data-free interval, so theirs is the whole range. Levels are sorted.
    The grid of each group is the aggregates' grid coarsened to ``n_candidates`` (one, or
    one per group; default ``candidates_for`` the public n̂_g at ε = 1, so the grid, and the
    label's fall with ε, do not depend on ε; ``plan_groups`` picks grids for the planned ε
    and the caller passes them on). ``public``/``n_estimate``
    label the expected error (``quantile_error``).
    """
    if method not in qm.METHODS:
        raise UnknownQueryError(f"Unknown quantile method {method!r}: use {qm.METHODS}.")
    levels = tuple(sorted(check_qs(qs)))
    counts_in = np.asarray(cands.counts)
    g = counts_in.shape[0]
    keys = check_keys(group_keys, g)
    eps, per_group = group_epsilons(epsilon, g)
    if public is not None:
        check_public(public, g)
    n_hat = public.n_hat if public is not None else (
        None if n_estimate is None else
        np.broadcast_to(np.asarray(check_n(n_estimate, g), dtype=float), (g,)).copy())
    cs = _grids(cands.n_candidates, g, method, n_candidates, n_hat)
    k = int(cands.contribution)
    gen = as_generator(rng)
    params = base_params(eps, per_group, k, keys)
    params.update({
        "lower": float(cands.lower), "upper": float(cands.upper), "qs": list(levels),
        "n_candidates": int(cs[0]) if (cs == cs[0]).all() else cs.tolist(), "method": method,
        "epsilon_split": {"all levels": per_group_value(eps, per_group)},
    })
    if public is not None:
        params["public"] = public_params(public)
    elif n_hat is not None:
        params["n_estimate"] = n_hat.tolist()
    eps_out = eps if per_group else float(eps[0])
    withheld = withheld_flags(eps, per_group)
    if method == "cdf":
        noisy, scales, branchings = {}, {}, {}
        for c in np.unique(cs):
            rows = cs == c
            counts = coarsen(CandidateCounts(cands.lower, cands.upper, cands.n_candidates,
                                             counts_in[rows], k), int(c)).counts
            cdf = qm.noisy_cdf(counts, eps[rows], k, gen, branching)
            nodes = np.full((g, cdf.nodes.shape[1]), np.nan)
            nodes[rows] = cdf.nodes
            t = np.full(g, np.nan)
            t[rows] = cdf.scale
            noisy[f"tree{c}"] = nodes
            scales[f"tree{c}"] = per_group_value(t, per_group or len(np.unique(cs)) > 1)
            branchings[str(c)] = cdf.shape.branching
        params["grid"] = {name: 1.0 for name in noisy}
        params["branching"] = branchings
        return finish_quantiles(noisy, scales, params, eps_out, withheld=withheld)
    idx = np.full((g, len(levels)), -1, dtype=np.intp)
    fn = qm.independent if method == "independent" else qm.joint
    for c in np.unique(cs):
        rows = cs == c
        counts = coarsen(CandidateCounts(cands.lower, cands.upper, cands.n_candidates,
                                         counts_in[rows], k), int(c)).counts
        idx[rows] = fn(counts, eps[rows], levels, k, gen)
    return _quantile_release(idx, None, cs, params, eps_out, withheld)


def _grids(available: int, g: int, method: str, n_candidates: Any, n_hat) -> np.ndarray:
    """The candidate grid per group (validated; the CDF is capped at 1001 points)."""
    if n_candidates is None:
        if n_hat is None:
            cs = np.full(g, available)
        else:
            return candidates_for(n_hat, available, method)
    else:
        try:
            cs = np.broadcast_to(np.asarray(n_candidates), (g,)).astype(float)
        except (TypeError, ValueError):
            cs = np.array([np.nan])
        if not np.isfinite(cs).all() or (cs != np.rint(cs)).any() or (cs < 2).any():
            raise UnknownQueryError("n_candidates must be a whole number of at least 2.")
        cs = cs.astype(int)
    if method == "cdf":
        cs = np.asarray([_largest_grid(int(c), MAX_CDF_CANDIDATES) if c > MAX_CDF_CANDIDATES
                         else int(c) for c in cs])
    for c in np.unique(cs):
        if (available - 1) % (c - 1):
            raise DataTypeError(
                f"A grid of {available} candidates can only be coarsened to n with (n − 1) "
                f"dividing {available - 1} (got {c})."
            )
    return np.asarray(cs, dtype=int)


def finish_quantiles(noisy: Mapping[str, Any], scales: Mapping[str, Any],
                     params: Mapping[str, Any], eps: Any, *, withheld: Any = False) -> Release:
    """Post-process the noisy tree CDFs into quantiles and intervals (also used by ``refine``)."""
    levels = tuple(params["qs"])
    first = np.asarray(next(iter(noisy.values())))
    g = first.shape[0]
    idx = np.full((g, len(levels)), -1.0)
    lo = np.full((g, len(levels)), -1, dtype=np.intp)
    hi = lo.copy()
    cs = np.broadcast_to(np.asarray(params["n_candidates"], dtype=int), (g,))
    for name, values in noisy.items():
        c = int(name.removeprefix("tree"))
        nodes = np.asarray(values, dtype=float)
        t = np.broadcast_to(np.asarray(scales[name], dtype=float), (g,))
        rows = np.isfinite(nodes).all(axis=1) & np.isfinite(t)
        if not rows.any():
            continue
        cdf = qm.cdf_from_nodes(nodes[rows], t[rows], c + 1, int(params["branching"][str(c)]))
        idx[rows] = qm.invert(cdf, levels)
        lo[rows], hi[rows] = qm.cdf_intervals(cdf, levels, LEVEL)
    return _quantile_release(idx, (lo, hi), cs, params, eps, withheld, noisy=noisy,
                             scales=scales)


def _quantile_release(idx, intervals, cs, params, eps, withheld, noisy=None,
                      scales=None) -> Release:
    lower, upper = float(params["lower"]), float(params["upper"])
    levels = tuple(params["qs"])
    step = ((upper - lower) / (cs - 1))[:, None]
    live = (idx >= 0).all(axis=1)
    cdf_method = params["method"] == "cdf"
    # the CDF locates the quantile in the cell [cand_o, cand_o + step): report its middle
    # (idx may end in .5: the middle of the region where the noisy CDF crosses q·N̂)
    value = np.minimum(lower + np.maximum(idx, 0) * step + (step / 2 if cdf_method else 0.0),
                       upper)
    if intervals is not None:
        lo, hi = intervals
        low = lower + np.maximum(lo, 0) * step
        high = np.minimum(lower + np.maximum(hi, 0) * step + step, upper)
    else:
        low, high = np.full(value.shape, lower), np.full(value.shape, upper)
    low, high = np.minimum(low, value), np.maximum(high, value)
    eps_arr = np.atleast_1d(np.asarray(eps, dtype=float))
    eps_g = np.broadcast_to(eps_arr, (idx.shape[0],))
    err, rel, model = _labels(params, eps_g, levels, cs, value.shape, lower, upper)
    value, low, high, err = (np.where(live[:, None], a, np.nan) for a in (value, low, high, err))
    rel = np.where(live, rel, np.nan)
    out_params = dict(params)
    out_params["error_model"] = model
    if "group_keys" not in params:
        value, err, low, high, rel = value[0], err[0], low[0], high[0], float(rel[0])
    mechanism = {
        "cdf": "noisy hierarchical CDF (discrete Laplace tree, consistent) on a candidate grid",
        "joint": "joint exponential mechanism (JointExp) on a candidate grid",
        "independent": "exponential mechanism per level on a candidate grid",
    }[params["method"]]
    return Release(
        statistic="quantiles", value=value, epsilon=total_epsilon(eps_arr), mechanism=mechanism,
        sensitivity=_sensitivity(params, levels, cs), params=out_params, expected_error=err,
        ci_low=low, ci_high=high, noisy=dict(noisy or {}), scales=dict(scales or {}),
        withheld=withheld, expected_relative_error=rel,
    )


def _labels(params, eps_g, levels, cs, shape, lower, upper):
    """(expected error per level, expected relative error %, what model) per group."""
    k = int(params["contribution"])
    public = public_from_params(params)
    if public is not None:
        err, _, _ = expected_quantile_error(public, eps_g, levels, k, params["method"], cs)
        rel = relative(err[:, band_levels(levels)].mean(axis=1), error_scale("quantiles", public))
        return err, rel, "simulated on n̂ typical points of " + public.source
    if params.get("n_estimate") is not None:
        n_est = np.broadcast_to(np.asarray(params["n_estimate"], dtype=float), eps_g.shape)
        err = uniform_quantile_error(upper - lower, n_est, eps_g, levels, k, cs,
                                     params["method"])
        spread = error_scale("quantiles", uniform_scales(n_est, lower, upper))
        return err, relative(err[:, band_levels(levels)].mean(axis=1), spread), \
            "values spread evenly over [lower, upper], n = n_estimate"
    return (np.full(shape, np.nan), np.full(shape[0], np.nan),
            "unknown without a public size")


def _sensitivity(params, levels, cs) -> dict[str, float]:
    k = float(params["contribution"])
    if params["method"] == "cdf":
        return {f"tree on {c} candidates (L1 over its levels)":
                k * qm.TreeShape(int(c) + 1, int(params["branching"][str(c)])).levels
                for c in np.unique(cs)}
    if params["method"] == "joint":
        return {"joint utility": 2.0 * k}
    return {f"q{q:g}": k * max(q, 1.0 - q) for q in levels}
