"""Sound-mode statistics: count, histogram, mean, variance, quantiles (+ grouped).

Neighbours add or remove one record, so n is private and is itself a noisy
component where needed. Sums are computed exactly: each clamped, centred value
is quantized to a power-of-two fixed-point grid (at most 2^22 steps per half
range) and summed as integer-valued float64, which is exact for n < 2^31 in any
order; noise is discrete Laplace on the same lattice. So the float summation
attacks on DP sums (Casacuberta et al. 2022) find nothing.

ε splits (documented choices): mean = count ε/2 + sum ε/2; variance = count,
sum and sum of squares ε/3 each; quantiles = ε/len(qs) per level. Grouped
versions use parallel composition (each record is in one group): total ε = ε.

Records whose value (or group) is missing are dropped first: they count as
absent, which is safe under add/remove neighbours; how many is never reported.
An empty or all-missing selection is answered like any other (the noise alone,
e.g. a noisy count near 0): refusing it would tell "no patient matches" apart
from "one patient matches", and n is private.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dp_engine.errors import DataTypeError, UnknownQueryError
from dp_engine.rng import RngLike, as_generator
from dp_engine.sound.accuracy import (
    dlap_abs_mean,
    dlap_half_width,
    mean_error,
    mean_half_width,
    quantile_error,
    variance_error,
)
from dp_engine.sound.aggregates import (
    _bins,
    _cell_counts,
    _group_codes,
    _keys,
    _numeric_with_groups,
    _present_count,
    _sums,
    candidate_counts,
    lattice_plan,
)
from dp_engine.sound.mechanisms import dlap_noise, gumbel_argmax
from dp_engine.sound.release import Release
from dp_engine.sound.validation import check_bounds, check_epsilon, check_qs

DEFAULT_CANDIDATES = 1001
DL = "discrete Laplace"


def _noise(true: np.ndarray, sens_units: float, eps: float, grid: float, rng) -> tuple:
    """(noisy value in value units, scale in value units) for lattice counts ``true``."""
    t = sens_units / eps
    noisy = np.asarray(true, dtype=float) + dlap_noise(t, np.shape(true), rng)
    return noisy * grid, t * grid


def _params_bins(kind: str, spec: Any) -> dict[str, Any]:
    if kind == "edges":
        return {"bin_kind": "edges", "bins": spec.tolist()}
    return {"bin_kind": "categories", "bins": list(spec)}


# ---------------------------------------------------------------- count / histogram


def count(values: Any, epsilon: float, *, rng: RngLike = None) -> Release:
    """DP number of non-missing records: discrete Laplace (Δ = 1), clamped ≥ 0."""
    eps = check_epsilon(epsilon)
    n = _present_count(values)
    noisy, scale = _noise(np.array([n]), 1.0, eps, 1.0, as_generator(rng))
    params = {"grid": {"count": 1.0}, "epsilon_split": {"count": eps}}
    return _finish_counts("count", {"count": noisy}, {"count": scale}, params, eps)


def histogram(values: Any, bins: Any, epsilon: float, *, rng: RngLike = None) -> Release:
    """DP histogram: discrete Laplace per cell (Δ = 1 under add/remove), clamped ≥ 0.

    ``bins`` is a numeric ndarray of edges (values outside go to the outer bins)
    or a sequence of public categories (exact match).
    """
    eps = check_epsilon(epsilon)
    kind, spec, nb = _bins(bins)
    true = _cell_counts(values, kind, spec, nb, None, 1)[0]
    noisy, scale = _noise(true, 1.0, eps, 1.0, as_generator(rng))
    params = {**_params_bins(kind, spec), "grid": {"count": 1.0}, "epsilon_split": {"count": eps}}
    return _finish_counts("histogram", {"count": noisy}, {"count": scale}, params, eps)


def grouped_histogram(
    values: Any,
    groups: Any,
    bins: Any,
    group_keys: Sequence[Any],
    epsilon: float,
    *,
    rng: RngLike = None,
) -> Release:
    """One histogram per public group key, shape (groups, bins); total ε = ε (parallel)."""
    eps = check_epsilon(epsilon)
    kind, spec, nb = _bins(bins)
    keys = _keys(group_keys)
    true = _cell_counts(values, kind, spec, nb, _group_codes(values, groups, keys), len(keys))
    noisy, scale = _noise(true, 1.0, eps, 1.0, as_generator(rng))
    params = {
        **_params_bins(kind, spec),
        "group_keys": keys,
        "grid": {"count": 1.0},
        "epsilon_split": {"count": eps},
    }
    return _finish_counts("histogram", {"count": noisy}, {"count": scale}, params, eps)


def _finish_counts(statistic, noisy, scales, params, eps) -> Release:
    raw = np.asarray(noisy["count"], dtype=float)
    value = np.maximum(raw, 0.0).astype(np.int64)
    t = scales["count"]
    err, hw = dlap_abs_mean(t), dlap_half_width(t, 0.95)
    low, high = np.maximum(value - hw, 0.0), value + hw
    if statistic == "count":
        value, low, high = int(value.reshape(-1)[0]), float(low[0]), float(high[0])
        expected = err
    else:
        expected = np.full(value.shape, err)
    return Release(
        statistic=statistic,
        value=value,
        epsilon=eps,
        mechanism="discrete Laplace (rounded, clamped at 0)",
        sensitivity=1.0,
        params=params,
        expected_error=expected,
        ci_low=low,
        ci_high=high,
        noisy={"count": raw},
        scales=dict(scales),
    )


# ---------------------------------------------------------------- mean / variance


def moment_scales(lower: float, upper: float, epsilon: float, squares: bool) -> tuple[dict, dict]:
    """(scale in value units, lattice step) per component for a mean (or variance) at ε."""
    grid, sens = lattice_plan(lower, upper, squares)
    share = epsilon / len(grid)
    return {k: sens[k] / share * grid[k] for k in grid}, grid


def _moment_release(
    statistic, values, groups, group_keys, lower, upper, epsilon, n_estimate, rng
) -> Release:
    eps = check_epsilon(epsilon)
    lower, upper = check_bounds(lower, upper)
    keys = None if group_keys is None else _keys(group_keys)
    gcodes = None if keys is None else _group_codes(values, groups, keys)
    x, gcodes = _numeric_with_groups(values, gcodes)
    squares = statistic == "variance"
    totals, grid, sens = _sums(x, gcodes, len(keys or [0]), lower, upper, squares)
    share = eps / len(totals)
    gen = as_generator(rng)
    noisy, scales = {}, {}
    for name in ("count", "sum", "sumsq"):
        if name in totals:
            noisy[name], scales[name] = _noise(totals[name], sens[name], share, grid[name], gen)
    params: dict[str, Any] = {
        "lower": lower,
        "upper": upper,
        "grid": grid,
        "epsilon_split": {name: share for name in noisy},
        "n_estimate": None if n_estimate is None else _check_n(n_estimate, len(keys or [0])),
    }
    if keys is not None:
        params["group_keys"] = keys
    sensitivity = {name: sens[name] * grid[name] for name in noisy}
    return finish(statistic, noisy, scales, params, eps, sensitivity)


def _check_n(n_estimate: Any, n_groups: int) -> Any:
    """A public size estimate: one finite number, or one per group."""
    try:
        arr = np.asarray(n_estimate, dtype=float)
    except (TypeError, ValueError):
        arr = np.array(np.nan)
    if not np.isfinite(arr).all() or arr.ndim > 1 or arr.size not in (1, n_groups):
        raise DataTypeError(
            f"n_estimate must be a finite DP-released count, or one per group ({n_groups}); "
            f"got {n_estimate!r}."
        )
    return arr.tolist()


def _n_for_error(params: Mapping[str, Any], noisy_count: np.ndarray) -> np.ndarray:
    """The public size estimate: the given n_estimate, else this release's own noisy count."""
    given = params.get("n_estimate")
    base = noisy_count if given is None else np.asarray(given, dtype=float)
    return np.maximum(np.broadcast_to(base, noisy_count.shape), 1.0)


def mean(
    values: Any,
    lower: float,
    upper: float,
    epsilon: float,
    *,
    n_estimate: float | None = None,
    rng: RngLike = None,
) -> Release:
    """DP mean of values clamped to public [lower, upper]: noisy centred sum / noisy count.

    ε/2 each. The expected error needs a size: ``n_estimate`` (a DP-released count,
    public) if given, else this release's own noisy count (post-processing).
    """
    return _moment_release("mean", values, None, None, lower, upper, epsilon, n_estimate, rng)


def grouped_mean(
    values: Any,
    groups: Any,
    group_keys: Sequence[Any],
    lower: float,
    upper: float,
    epsilon: float,
    *,
    n_estimate: Any = None,
    rng: RngLike = None,
) -> Release:
    """One DP mean per public group key (parallel composition: total ε = ε)."""
    return _moment_release(
        "mean", values, groups, group_keys, lower, upper, epsilon, n_estimate, rng
    )


def variance(
    values: Any,
    lower: float,
    upper: float,
    epsilon: float,
    *,
    n_estimate: float | None = None,
    rng: RngLike = None,
) -> Release:
    """DP population variance (ddof = 0) of clamped values, in [0, ((upper − lower)/2)²].

    Noisy count, centred sum and centred sum of squares, ε/3 each.
    """
    return _moment_release("variance", values, None, None, lower, upper, epsilon, n_estimate, rng)


def grouped_variance(
    values: Any,
    groups: Any,
    group_keys: Sequence[Any],
    lower: float,
    upper: float,
    epsilon: float,
    *,
    n_estimate: Any = None,
    rng: RngLike = None,
) -> Release:
    """One DP variance per public group key (parallel composition: total ε = ε)."""
    return _moment_release(
        "variance", values, groups, group_keys, lower, upper, epsilon, n_estimate, rng
    )


def _finish_moments(statistic, noisy, scales, params, eps, sensitivity) -> Release:
    lower, upper = float(params["lower"]), float(params["upper"])
    width, mid, half = upper - lower, (lower + upper) / 2.0, (upper - lower) / 2.0
    grid = params["grid"]
    count_ = np.asarray(noisy["count"], dtype=float)
    denom = np.maximum(count_, 1.0)
    n_est = _n_for_error(params, count_)
    offset = np.asarray(noisy["sum"], dtype=float) / denom
    if statistic == "mean":
        value = np.clip(mid + offset, lower, upper)
        err = mean_error(width, scales["sum"], grid["sum"], scales["count"], n_est)
        hw = mean_half_width(width, scales["sum"], grid["sum"], scales["count"], n_est)
        lo_ok, hi_ok = lower, upper
        mechanism = "discrete Laplace on a fixed-point lattice (noisy sum / noisy count)"
    else:
        second = np.asarray(noisy["sumsq"], dtype=float) / denom + half * half / 2.0
        value = np.clip(second - offset * offset, 0.0, half * half)
        err = variance_error(width, scales, grid, n_est)
        hw = variance_error(width, scales, grid, n_est, level=0.95)
        lo_ok, hi_ok = 0.0, half * half
        mechanism = "discrete Laplace on a fixed-point lattice (noisy count, sum, sum of squares)"
    low, high = np.maximum(value - hw, lo_ok), np.minimum(value + hw, hi_ok)
    if "group_keys" not in params:
        value, err, low, high = (float(np.reshape(a, -1)[0]) for a in (value, err, low, high))
    out_params = dict(params)
    out_params["n_estimate_source"] = (
        "this release's noisy count" if params.get("n_estimate") is None else "public n_estimate"
    )
    return Release(
        statistic=statistic,
        value=value,
        epsilon=eps,
        mechanism=mechanism,
        sensitivity=dict(sensitivity),
        params=out_params,
        expected_error=err,
        ci_low=low,
        ci_high=high,
        noisy={k: np.asarray(v, dtype=float) for k, v in noisy.items()},
        scales=dict(scales),
    )


def finish(statistic, noisy, scales, params, eps, sensitivity=None) -> Release:
    """Post-process noisy components into a Release (used again by ``refine``)."""
    if statistic in ("count", "histogram"):
        return _finish_counts(statistic, noisy, scales, params, eps)
    if statistic in ("mean", "variance"):
        if sensitivity is None:
            sensitivity = {}
        return _finish_moments(statistic, noisy, scales, params, eps, sensitivity)
    raise UnknownQueryError(f"Cannot post-process a release of statistic {statistic!r}.")


# ---------------------------------------------------------------- quantiles


def _quantile_release(
    values, groups, group_keys, lower, upper, epsilon, qs, n_candidates, n_estimate, rng
) -> Release:
    eps = check_epsilon(epsilon)
    lower, upper = check_bounds(lower, upper)
    levels = check_qs(qs)
    c = DEFAULT_CANDIDATES if n_candidates is None else int(n_candidates)
    if c < 2 or c != n_candidates and n_candidates is not None:
        raise UnknownQueryError("n_candidates must be a whole number of at least 2.")
    keys = None if group_keys is None else _keys(group_keys)
    n_groups = 1 if keys is None else len(keys)
    hist = candidate_counts(values, lower, upper, c, groups=groups, group_keys=keys).counts
    below = np.cumsum(hist, axis=1)  # below[:, j] = #{x < candidate j}
    n = below[:, -1:].astype(float)
    below = below[:, :c].astype(float)
    q = np.asarray(levels)
    sens = np.maximum(q, 1.0 - q)
    eps_q = eps / len(levels)
    gen = as_generator(rng)
    chosen = np.empty((n_groups, len(levels)), dtype=np.intp)
    for k in range(len(levels)):  # one (groups, candidates) utility table at a time
        logits = np.abs(below - q[k] * n)
        logits *= -eps_q / (2.0 * sens[k])
        chosen[:, k] = gumbel_argmax(logits, gen)
    grid = np.linspace(lower, upper, c)
    value = np.sort(grid[chosen], axis=-1)
    n_est = None if n_estimate is None else np.asarray(_check_n(n_estimate, n_groups), dtype=float)
    n_b = None if n_est is None else np.broadcast_to(np.reshape(n_est, (-1, 1)), value.shape)
    err = quantile_error(upper - lower, c, eps_q, sens, n_b)
    hw = quantile_error(upper - lower, c, eps_q, sens, n_b, level=0.95)
    err = np.broadcast_to(err, value.shape).copy()
    hw = np.broadcast_to(hw, value.shape)
    low = np.where(np.isnan(hw), lower, np.maximum(value - hw, lower))
    high = np.where(np.isnan(hw), upper, np.minimum(value + hw, upper))
    params: dict[str, Any] = {
        "lower": lower,
        "upper": upper,
        "qs": list(levels),
        "n_candidates": c,
        "epsilon_split": {f"q{level:g}": eps_q for level in levels},
        "n_estimate": None if n_est is None else n_est.tolist(),
        "error_model": "values spread evenly over [lower, upper], n = n_estimate",
    }
    if keys is not None:
        params["group_keys"] = keys
    else:
        value, err, low, high = value[0], err[0], low[0], high[0]
    return Release(
        statistic="quantiles",
        value=value,
        epsilon=eps,
        mechanism="exponential mechanism on a fixed candidate grid",
        sensitivity={f"q{level:g}": float(s) for level, s in zip(levels, sens, strict=True)},
        params=params,
        expected_error=err,
        ci_low=low,
        ci_high=high,
    )


def quantiles(
    values: Any,
    lower: float,
    upper: float,
    epsilon: float,
    *,
    qs: Sequence[float] = (0.25, 0.5, 0.75),
    n_candidates: int | None = None,
    n_estimate: float | None = None,
    rng: RngLike = None,
) -> Release:
    """DP quantiles by the exponential mechanism over a public grid, sorted afterwards.

    Utility of candidate c for level q: −|#{x < c} − q·n|, sensitivity max(q, 1 − q)
    under add/remove. ε/len(qs) per level. O(n) via one bincount. Without
    ``n_estimate`` the expected error is unknown (NaN) and the interval is the range.
    """
    return _quantile_release(
        values, None, None, lower, upper, epsilon, qs, n_candidates, n_estimate, rng
    )


def grouped_quantiles(
    values: Any,
    groups: Any,
    group_keys: Sequence[Any],
    lower: float,
    upper: float,
    epsilon: float,
    *,
    qs: Sequence[float] = (0.25, 0.5, 0.75),
    n_candidates: int | None = None,
    n_estimate: Any = None,
    rng: RngLike = None,
) -> Release:
    """Quantiles per public group key, shape (groups, len(qs)); total ε = ε (parallel)."""
    return _quantile_release(
        values, groups, group_keys, lower, upper, epsilon, qs, n_candidates, n_estimate, rng
    )
