"""Means and variances from ``MomentSums``: discrete Laplace on the exact lattice sums."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dp_engine.errors import DataTypeError, UnknownQueryError
from dp_engine.rng import RngLike, as_generator
from dp_engine.sound.accuracy import laplace_sum, mean_error, variance_error
from dp_engine.sound.aggregates import MomentSums, lattice_plan
from dp_engine.sound.pilot import GroupScales, uniform_scales
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
from dp_engine.sound.spread import SCALE_WORDS, error_scale
from dp_engine.sound.statistic import Statistic


def moment_noise(lower: float, upper: float, epsilon: Any, statistic: str,
                  contribution: int = 1) -> tuple[dict, dict, dict]:
    """(noise scale in value units, lattice step, sensitivity in value units) per component.

    ε splits evenly: mean = count + sum (ε/2 each); variance = count, sum, sum of squares
    (ε/3 each). ``epsilon`` may be an array (one scale per group).
    """
    names = Statistic.of(statistic).components
    grid, sens = lattice_plan(lower, upper, Statistic.of(statistic) is Statistic.VARIANCE)
    share = np.asarray(epsilon, dtype=float) / len(names)
    k = float(contribution)
    scales = {n: k * sens[n] / share * grid[n] for n in names}
    return scales, {n: grid[n] for n in names}, {n: k * sens[n] * grid[n] for n in names}


def release_moments(sums: MomentSums, epsilon: Any, *, rng: RngLike = None,
                    statistic: str | None = None, group_keys: Sequence[Any] | None = None,
                    n_estimate: Any = None, public: GroupScales | None = None) -> Release:
    """DP mean (noisy centred sum / noisy count) or variance (count, sum, sum of squares).

    Discrete Laplace on each exact lattice sum, scale k·Δ/(ε_g/parts). ``public`` (DP sizes
    and shapes) or ``n_estimate`` label the expected error; without either, this release's
    own noisy count is used (post-processing) with the worst-case centre.
    """
    statistic = Statistic.of(statistic or (Statistic.VARIANCE if sums.squares else Statistic.MEAN))
    if not statistic.moments:
        raise UnknownQueryError(f"Moment sums give a mean or a variance, not {statistic!r}.")
    if statistic is Statistic.VARIANCE and not sums.squares:
        raise DataTypeError("A variance needs the sums of squares (squares=True).")
    count = np.asarray(sums.count, dtype=float).reshape(-1)
    g = count.size
    keys = check_keys(group_keys, g)
    eps, per_group = group_epsilons(epsilon, g)
    k = int(sums.contribution)
    scales, grid, sens = moment_noise(sums.lower, sums.upper, eps, statistic, k)
    true = {"count": count, "sum": np.asarray(sums.s1, dtype=float).reshape(-1)}
    if statistic is Statistic.VARIANCE:
        true["sumsq"] = np.asarray(sums.s2, dtype=float).reshape(-1)
    gen = as_generator(rng)
    noisy = {name: noise_rows(true[name], scales[name] / grid[name], gen) * grid[name]
             for name in statistic.components}
    params = base_params(eps, per_group, k, keys)
    params.update({
        "lower": float(sums.lower), "upper": float(sums.upper), "grid": grid,
        "epsilon_split": {n: per_group_value(eps / len(noisy), per_group) for n in noisy},
    })
    if public is not None:
        check_public(public, g)
        params["public"] = public_params(public)
    elif n_estimate is not None:
        params["n_estimate"] = check_n(n_estimate, g)
    return finish_moments(statistic, noisy, {n: per_group_value(s, per_group)
                                             for n, s in scales.items()},
                          params, eps if per_group else float(eps[0]), sens,
                          withheld=withheld_flags(eps, per_group))


def moment_error_scales(statistic: str, scales: Mapping[str, Any], lower: float, upper: float,
                        mean_c: Any, var: Any) -> list[np.ndarray]:
    """Laplace scales of N·error: mean Z_s − μ_c·Z_c; variance Z2 − 2μ_c·Z1 + (h²/2 − var +
    μ_c²)·Z_c (first order; μ_c the mean minus the midpoint, h the half range)."""
    h = (upper - lower) / 2.0
    mu = np.abs(np.asarray(mean_c, dtype=float))
    b = {n: np.asarray(v, dtype=float) for n, v in scales.items()}
    if Statistic.of(statistic) is Statistic.MEAN:
        return [b["sum"], mu * b["count"]]
    coef = np.abs(h * h / 2.0 - np.asarray(var, dtype=float) + mu**2)
    return [b["sumsq"], 2.0 * mu * b["sum"], coef * b["count"]]


def moment_error(statistic: str, scales: Mapping[str, Any], lower: float, upper: float,
                 mean: Any, var: Any, n: Any, level: float | None = None) -> np.ndarray:
    """E|error| (level None) or its ``level`` quantile, from public estimates of the group's
    mean, variance and size n: the first-order Laplace sum over n, plus for a variance the
    second-order pull E[Z_1²]/n² = 2·b_sum²/n² of the noisy sum (it biases the variance
    down). Not modelled: E[1/N'] > 1/n, which adds up to ~25 % to the *mean* error of a
    variance for small groups at small ε (the median barely moves; docs/accuracy.md).
    Capped at the range of the statistic.
    """
    statistic = Statistic.of(statistic)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    terms = moment_error_scales(statistic, scales, lower, upper,
                                np.asarray(mean, dtype=float) - (lower + upper) / 2.0, var)
    err = laplace_sum(terms, level) / n
    if statistic is Statistic.VARIANCE:
        err = err + 2.0 * np.asarray(scales["sum"], dtype=float) ** 2 / n**2
    return np.minimum(err, upper - lower if statistic is Statistic.MEAN
                      else ((upper - lower) / 2) ** 2)


def finish_moments(statistic: str, noisy: Mapping[str, Any], scales: Mapping[str, Any],
                   params: Mapping[str, Any], eps: Any, sensitivity: Any = None, *,
                   withheld: Any = False) -> Release:
    """Post-process noisy sums into a mean or variance release (also used by ``refine``)."""
    statistic = Statistic.of(statistic)
    mean = statistic is Statistic.MEAN
    lower, upper = float(params["lower"]), float(params["upper"])
    mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
    grid = params["grid"]
    n_raw = np.asarray(noisy["count"], dtype=float).reshape(-1)
    g = n_raw.size
    live = np.isfinite(n_raw)
    sc = {n: np.broadcast_to(np.asarray(v, dtype=float), (g,)) for n, v in scales.items()}
    denom = np.maximum(np.where(live, n_raw, 1.0), 1.0)
    offset = np.asarray(noisy["sum"], dtype=float).reshape(-1) / denom
    if mean:
        value = np.clip(mid + offset, lower, upper)
        lo_ok, hi_ok = lower, upper
        mechanism = "discrete Laplace on a fixed-point lattice (noisy sum / noisy count)"
        var_hat = np.zeros(g)
    else:
        second = np.asarray(noisy["sumsq"], dtype=float).reshape(-1) / denom + half * half / 2
        value = np.clip(second - offset * offset, 0.0, half * half)
        lo_ok, hi_ok = 0.0, half * half
        mechanism = "discrete Laplace on a fixed-point lattice (noisy count, sum, sum of squares)"
        var_hat = value
    public = public_from_params(params)
    err, scale_src, scale = _moment_expected(statistic, sc, grid, params, public, n_raw, lower,
                                             upper, value)
    below, above = _moment_half_width(statistic, sc, lower, upper, offset, var_hat, n_raw)
    centre = mid + offset if mean else second - offset * offset
    whole = ~(np.isfinite(below) & np.isfinite(above))   # too few records: only the bounds
    low = np.where(whole, lo_ok, np.maximum(np.minimum(centre - below, hi_ok), lo_ok))
    high = np.where(whole, hi_ok, np.minimum(np.maximum(centre + above, lo_ok), hi_ok))
    low, high = np.minimum(low, value), np.maximum(high, value)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(scale > 0, 100.0 * err / np.where(scale > 0, scale, 1.0), np.inf)
    if not live.all():
        value, err, low, high, rel = (np.where(live, a, np.nan)
                                      for a in (value, err, low, high, rel))
    out_params = dict(params)
    out_params["n_estimate_source"] = (
        "public group sizes and pilot" if public is not None else
        "public n_estimate" if params.get("n_estimate") is not None else
        "this release's noisy count"
    )
    out_params["error_scale"] = scale_src
    if "group_keys" not in params:
        value, err, low, high, rel = (float(np.reshape(a, -1)[0])
                                      for a in (value, err, low, high, rel))
    return Release(
        statistic=statistic, value=value,
        epsilon=total_epsilon(np.atleast_1d(np.asarray(eps, dtype=float))), mechanism=mechanism,
        sensitivity=dict(sensitivity or {}), params=out_params, expected_error=err,
        ci_low=low, ci_high=high,
        noisy={k: np.asarray(v, dtype=float) for k, v in noisy.items()},
        scales=dict(scales), withheld=withheld, expected_relative_error=rel,
    )


def _moment_expected(statistic, sc, grid, params, public, n_raw, lower, upper, value):
    """(expected absolute error, what the relative error is against, that scale)."""
    width = upper - lower
    if public is not None:
        mean_p, var_p = public.mean(), public.variance()
        err = moment_error(statistic, sc, lower, upper, mean_p, var_p, public.n_hat)
        return err, f"{SCALE_WORDS[statistic]} ({public.source})", \
            error_scale(statistic, public)
    given = params.get("n_estimate")
    n = np.maximum(np.broadcast_to(n_raw if given is None else np.asarray(given, dtype=float),
                                   n_raw.shape), 1.0)
    if statistic is Statistic.MEAN:
        err = mean_error(width, sc["sum"], grid["sum"], sc["count"], n)
    else:
        err = variance_error(width, {k: v for k, v in sc.items()}, grid, n)
    spread = error_scale(statistic, uniform_scales(np.ones(n.shape), lower, upper))
    return err, f"{SCALE_WORDS[statistic]} (values spread evenly over the bounds)", spread


def _moment_half_width(statistic, sc, lower, upper, offset, var_hat, n_raw):
    """(below, above): how far the truth may lie below / above the estimate (95 %).

    Valid whatever the data (docs/accuracy.md). Mean: error·N' = Z_s − μ_c·Z_c exactly (N'
    the noisy count), so with q the quantile of |Z_s − μ·Z_c| at the largest plausible |μ_c|
    the interval value ± q/N' covers. Variance: N'·error = L + (μ_c²·Z_c² − Z_1²)/N' with L
    first order; the second-order part lies in [−Z_1², μ_c²·Z_c²]/N', so it widens one side
    each. Built at ``BUILD_LEVEL``. N' too small: inf (the whole range).
    """
    half = (upper - lower) / 2.0
    n_ok = np.where(np.isfinite(n_raw), n_raw, 0.0)
    pos = np.maximum(n_ok, 1.0)
    mu = np.abs(offset)
    below = above = np.full(n_raw.shape, np.inf)
    for _ in range(2):      # plug in μ_c, then the largest |μ_c| inside the interval
        terms = moment_error_scales(statistic, sc, lower, upper, np.minimum(mu, half),
                                    var_hat)
        q = laplace_sum(terms, BUILD_LEVEL)
        below = above = np.where(n_ok >= 1.0, q / pos, np.inf)
        if statistic is Statistic.MEAN:
            mu = np.abs(offset) + below
            continue
        q1 = laplace_sum([sc["sum"]], BUILD_LEVEL)
        qc = laplace_sum([sc["count"]], BUILD_LEVEL)
        above = below + q1 * q1 / pos**2        # truth above the estimate: Z_1² pulled it down
        below = below + (np.minimum(mu, half) * qc) ** 2 / pos**2
        mu = np.abs(offset) + laplace_sum(moment_error_scales(
            Statistic.MEAN, sc, lower, upper, np.minimum(mu, half), 0.0), BUILD_LEVEL) / pos
    qc = laplace_sum([sc["count"]], BUILD_LEVEL)
    enough = n_ok - qc >= 1.0
    return np.where(enough, below, np.inf), np.where(enough, above, np.inf)
