"""Pick ε for a noise factor from public metadata only (no data is read).

The accuracy map is the EXPECTED relative error (percent) of the shown statistic,
using the same formulas that label each release (``accuracy``):

* count: E|noise| / n;
* histogram: E|noise| per cell / average cell count n/(bins · groups);
* mean and quantiles: expected absolute error / (upper − lower) (quantiles: the noisy-CDF
  release's error under evenly spread values, ``releases.uniform_quantile_error``);
* variance: expected absolute error / ((upper − lower)/2)², the largest variance.

Grouped statistics use n / n_groups records per group. The search is Algorithm 1
of PyDPLib (binary search over a sorted ε grid), run on this map instead of on
the data, and bounded by log2(grid size) steps. It returns the smallest ε whose
error is inside the band (the most private ε that still meets it). The error
falls as ε grows, so a noisier band never gets a larger ε. When no grid ε is in
the band, ``reached`` is False and the closest ε is returned with an explanation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dp_engine.bands import NOISE_LABELS, band
from dp_engine.errors import DataTypeError, InvalidEpsilonError, UnknownQueryError
from dp_engine.sound.accuracy import dlap_abs_mean, mean_error, variance_error
from dp_engine.sound.releases import candidates_for, uniform_quantile_error
from dp_engine.sound.statistic import Statistic
from dp_engine.sound.statistics import DEFAULT_CANDIDATES, moment_scales
from dp_engine.sound.validation import check_bounds, check_qs

# One ε per view, against the column's range: the accuracy map the current Explore page uses.
# The per-group calibration with the one definition of relative error is ``plan``.

DEFAULT_GRID = np.geomspace(1e-3, 10.0, 400)


@dataclass(frozen=True)
class Calibration:
    """The chosen ε, its expected relative error (percent) and the search trace."""

    epsilon: float
    noise_factor: int
    band: tuple[float, float]
    expected_relative_error: float
    reached: bool
    steps: tuple[tuple[float, float], ...]
    message: str


def n_bins(bins: Any) -> int:
    """Number of histogram cells of a bins spec (edges array, categories or a count)."""
    if bins is None:
        raise UnknownQueryError("A histogram calibration needs its bins (edges or categories).")
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        k = int(bins)
    elif isinstance(bins, np.ndarray) and bins.dtype.kind in "iuf":
        k = bins.size - 1
    else:
        k = len(bins)
    if k < 1:
        raise UnknownQueryError("A histogram needs at least one bin.")
    return k


def expected_relative_error(
    statistic: str,
    epsilon: float,
    *,
    n: float,
    lower: float | None = None,
    upper: float | None = None,
    bins: Any = None,
    n_groups: int = 1,
    qs: Sequence[float] = (0.25, 0.5, 0.75),
    n_candidates: int | None = None,
) -> float:
    """Expected relative error in percent of ``statistic`` released at ε (public inputs)."""
    statistic = Statistic.of(statistic)
    per_group = max(float(n) / n_groups, 1.0)
    if statistic is Statistic.COUNT:
        return 100.0 * dlap_abs_mean(1.0 / epsilon) / per_group
    if statistic is Statistic.HISTOGRAM:
        return 100.0 * dlap_abs_mean(1.0 / epsilon) / (per_group / n_bins(bins))
    lo, hi = check_bounds(lower, upper)
    width = hi - lo
    if statistic is Statistic.MEAN:
        scales, grid = moment_scales(lo, hi, epsilon, squares=False)
        err = mean_error(width, scales["sum"], grid["sum"], scales["count"], per_group)
        return 100.0 * float(err) / width
    if statistic is Statistic.VARIANCE:
        scales, grid = moment_scales(lo, hi, epsilon, squares=True)
        return 100.0 * float(variance_error(width, scales, grid, per_group)) / (width / 2) ** 2
    # quantiles: the label of the default (noisy CDF) release under evenly spread values
    levels = sorted(check_qs(qs))
    c = DEFAULT_CANDIDATES if n_candidates is None else int(n_candidates)
    grid = candidates_for([per_group], c)   # the release's default grid (ε-free)
    errs = uniform_quantile_error(width, [per_group], [epsilon], levels, 1, grid)
    return 100.0 * float(np.mean(errs)) / width


def _grid(epsilon_grid: Any) -> np.ndarray:
    grid = DEFAULT_GRID if epsilon_grid is None else np.asarray(epsilon_grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or not (np.isfinite(grid).all() and (grid > 0).all()):
        raise InvalidEpsilonError("The ε grid must be a non-empty list of finite numbers > 0.")
    return np.unique(grid)


def calibrate(
    noise_factor: int,
    statistic: str,
    *,
    n: float,
    lower: float | None = None,
    upper: float | None = None,
    bins: Any = None,
    n_groups: int = 1,
    qs: Sequence[float] = (0.25, 0.5, 0.75),
    epsilon_grid: Any = None,
    n_candidates: int | None = None,
) -> Calibration:
    """The smallest grid ε whose expected relative error lies in the noise factor's band.

    ``n`` must be public (a DP-released count). Terminates after ⌈log2(grid)⌉ + 1
    evaluations; never returns 0 or hangs.
    """
    low, high = band(noise_factor)
    statistic = Statistic.of(statistic)
    try:
        n_value = float(n)
    except (TypeError, ValueError):
        n_value = math.nan
    if not math.isfinite(n_value):
        raise DataTypeError(f"n must be a finite, DP-released count (got {n!r}).")
    if int(n_groups) != n_groups or n_groups < 1:
        raise UnknownQueryError(f"n_groups must be a whole number ≥ 1 (got {n_groups!r}).")
    grid = _grid(epsilon_grid)

    def err(eps: float) -> float:
        return expected_relative_error(
            statistic,
            eps,
            n=n_value,
            lower=lower,
            upper=upper,
            bins=bins,
            n_groups=int(n_groups),
            qs=qs,
            n_candidates=n_candidates,
        )

    steps: list[tuple[float, float]] = []
    lo_i, hi_i = 0, grid.size - 1
    while lo_i < hi_i:  # smallest index with err ≤ high (err falls as ε grows)
        mid = (lo_i + hi_i) // 2
        e = err(float(grid[mid]))
        steps.append((float(grid[mid]), e))
        if e <= high:
            hi_i = mid
        else:
            lo_i = mid + 1
    i = lo_i
    e_i = err(float(grid[i]))
    steps.append((float(grid[i]), e_i))
    factor = int(noise_factor)
    label = f"{NOISE_LABELS[factor]} noise band ({low:g}–{high:g} %)"
    what = f"the {statistic}" + (f" in {n_groups} groups" if n_groups > 1 else "")
    if low <= e_i <= high:
        msg = f"ε = {grid[i]:.3g} gives an expected error of {e_i:.2f} % for {what}: {label}."
        return Calibration(float(grid[i]), factor, (low, high), e_i, True, tuple(steps), msg)
    if e_i > high:  # even the largest ε is too noisy
        msg = (
            f"The {label} cannot be met: even ε = {grid[i]:.3g} gives an expected error of "
            f"{e_i:.1f} % for {what} (about {n_value:.0f} records). Using that ε; "
            "wider bounds, fewer bins or more records would help."
        )
        return Calibration(float(grid[i]), factor, (low, high), e_i, False, tuple(steps), msg)
    if i > 0:  # the band falls between two neighbouring grid points
        e_prev = err(float(grid[i - 1]))
        if e_prev - high < low - e_i:
            i, e_i = i - 1, e_prev
        msg = (
            f"No ε on the grid gives an error inside the {label}; the closest is "
            f"ε = {grid[i]:.3g} with {e_i:.2f} %."
        )
        return Calibration(float(grid[i]), factor, (low, high), e_i, False, tuple(steps), msg)
    msg = (
        f"The {label} cannot be met: even the smallest ε = {grid[0]:.3g} gives only "
        f"{e_i:.2f} % expected error for {what}. Using that ε (more private than asked)."
    )
    return Calibration(float(grid[0]), factor, (low, high), e_i, False, tuple(steps), msg)
