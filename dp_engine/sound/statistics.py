"""Sound-mode statistics on rows: count, histogram, mean, variance, quantiles (+ grouped).

Each function is the reference aggregate of ``aggregates`` followed by the release of
``releases``: one implementation of the noise, whether the aggregates come from these
rows or from a database. Neighbours add or remove one patient, so n is private.

Sums are computed exactly: each clamped, centred value is quantized to a power-of-two
fixed-point grid (at most 2^22 steps per half range) and summed as integer-valued float64,
which is exact for n < 2^31 in any order; noise is discrete Laplace on the same lattice. So
the float summation attacks on DP sums (Casacuberta et al. 2022) find nothing.

ε splits (documented choices): mean = count ε/2 + sum ε/2; variance = count, sum and sum
of squares ε/3 each; quantiles: one noisy tree CDF at ε for all levels (default), or
JointExp at ε, or ε/len(qs) per level (``method="independent"``). Grouped versions use
parallel composition (each record is in one group): total ε = ε, or one ε per group.

Records whose value (or group) is missing are dropped first: they count as absent, which is
safe under add/remove neighbours; how many is never reported. An empty or all-missing
selection is answered like any other (the noise alone, e.g. a noisy count near 0): refusing
it would tell "no patient matches" apart from "one patient matches", and n is private.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dp_engine.errors import UnknownQueryError
from dp_engine.rng import RngLike
from dp_engine.sound.aggregates import (
    CellCounts,
    _present_count,
    candidate_counts,
    cell_counts,
    moment_sums,
)
from dp_engine.sound.pilot import GroupScales
from dp_engine.sound.release import Release
from dp_engine.sound.releases import release_counts, release_moments, release_quantiles
from dp_engine.sound.statistic import Statistic
from dp_engine.sound.validation import check_bounds, check_epsilon

DEFAULT_CANDIDATES = 1001

__all__ = [
    "DEFAULT_CANDIDATES", "count", "grouped_histogram", "grouped_mean", "grouped_quantiles",
    "grouped_variance", "histogram", "mean", "quantiles", "variance",
]


# ---------------------------------------------------------------- count / histogram


def count(values: Any, epsilon: float, *, rng: RngLike = None) -> Release:
    """DP number of non-missing records: discrete Laplace (Δ = 1), clamped ≥ 0."""
    check_epsilon(epsilon)
    cells = CellCounts(np.array([[_present_count(values)]], dtype=np.int64))
    return release_counts(cells, epsilon, rng=rng, statistic=Statistic.COUNT)


def histogram(values: Any, bins: Any, epsilon: float, *, rng: RngLike = None) -> Release:
    """DP histogram: discrete Laplace per cell (Δ = 1 under add/remove), clamped ≥ 0.

    ``bins`` is a numeric ndarray of edges (values outside go to the outer bins)
    or a sequence of public categories (exact match).
    """
    check_epsilon(epsilon)
    return release_counts(cell_counts(values, bins), epsilon, rng=rng, bins=bins)


def grouped_histogram(values: Any, groups: Any, bins: Any, group_keys: Sequence[Any],
                      epsilon: Any, *, rng: RngLike = None) -> Release:
    """One histogram per public group key, shape (groups, bins); ε = ε, or one per group."""
    cells = cell_counts(values, bins, groups=groups, group_keys=group_keys)
    return release_counts(cells, epsilon, rng=rng, bins=bins, group_keys=group_keys)


# ---------------------------------------------------------------- mean / variance


def _moments(statistic, values, groups, group_keys, lower, upper, epsilon, n_estimate,
             public, rng) -> Release:
    if np.ndim(epsilon) == 0:
        check_epsilon(epsilon)
    lower, upper = check_bounds(lower, upper)
    squares = Statistic.of(statistic) is Statistic.VARIANCE
    sums = moment_sums(values, lower, upper, squares=squares, groups=groups,
                       group_keys=group_keys)
    return release_moments(sums, epsilon, rng=rng, statistic=statistic,
                           group_keys=None if group_keys is None else list(group_keys),
                           n_estimate=n_estimate, public=public)


def mean(values: Any, lower: float, upper: float, epsilon: float, *,
         n_estimate: float | None = None, public: GroupScales | None = None,
         rng: RngLike = None) -> Release:
    """DP mean of values clamped to public [lower, upper]: noisy centred sum / noisy count.

    ε/2 each. The expected error needs a size: ``public`` (DP size and pilot) or
    ``n_estimate`` (a DP-released count) if given, else this release's own noisy count.
    """
    return _moments("mean", values, None, None, lower, upper, epsilon, n_estimate, public, rng)


def grouped_mean(values: Any, groups: Any, group_keys: Sequence[Any], lower: float,
                 upper: float, epsilon: Any, *, n_estimate: Any = None,
                 public: GroupScales | None = None, rng: RngLike = None) -> Release:
    """One DP mean per public group key (parallel composition: ε, or one ε per group)."""
    return _moments("mean", values, groups, group_keys, lower, upper, epsilon, n_estimate,
                    public, rng)


def variance(values: Any, lower: float, upper: float, epsilon: float, *,
             n_estimate: float | None = None, public: GroupScales | None = None,
             rng: RngLike = None) -> Release:
    """DP population variance (ddof = 0) of clamped values, in [0, ((upper − lower)/2)²].

    Noisy count, centred sum and centred sum of squares, ε/3 each.
    """
    return _moments("variance", values, None, None, lower, upper, epsilon, n_estimate, public,
                    rng)


def grouped_variance(values: Any, groups: Any, group_keys: Sequence[Any], lower: float,
                     upper: float, epsilon: Any, *, n_estimate: Any = None,
                     public: GroupScales | None = None, rng: RngLike = None) -> Release:
    """One DP variance per public group key (parallel composition: ε, or one ε per group)."""
    return _moments("variance", values, groups, group_keys, lower, upper, epsilon, n_estimate,
                    public, rng)


# ---------------------------------------------------------------- quantiles


def _quantiles(values, groups, group_keys, lower, upper, epsilon, qs, n_candidates, method,
               n_estimate, public, rng) -> Release:
    if np.ndim(epsilon) == 0:
        check_epsilon(epsilon)
    lower, upper = check_bounds(lower, upper)
    cands = candidate_counts(values, lower, upper, DEFAULT_CANDIDATES if n_candidates is None
                             else _whole(n_candidates), groups=groups, group_keys=group_keys)
    return release_quantiles(cands, epsilon, qs=qs, rng=rng, method=method,
                             group_keys=None if group_keys is None else list(group_keys),
                             n_estimate=n_estimate, public=public,
                             n_candidates=n_candidates)


def _whole(n_candidates: Any) -> int:
    try:
        c = int(n_candidates)
    except (TypeError, ValueError):
        c = 0
    if c < 2 or c != n_candidates:
        raise UnknownQueryError("n_candidates must be a whole number of at least 2.")
    return c


def quantiles(values: Any, lower: float, upper: float, epsilon: float, *,
              qs: Sequence[float] = (0.25, 0.5, 0.75), n_candidates: int | None = None,
              method: str = "cdf", n_estimate: float | None = None,
              public: GroupScales | None = None, rng: RngLike = None) -> Release:
    """DP quantiles on a public candidate grid (``releases.release_quantiles``).

    Default ``method="cdf"``: a noisy hierarchical CDF, inverted at each level, with 95 %
    intervals valid whatever the data. Without ``n_candidates`` the grid is 1001 points,
    coarsened to suit the public ``n_estimate`` when one is given.
    """
    return _quantiles(values, None, None, lower, upper, epsilon, qs, n_candidates, method,
                      n_estimate, public, rng)


def grouped_quantiles(values: Any, groups: Any, group_keys: Sequence[Any], lower: float,
                      upper: float, epsilon: Any, *, qs: Sequence[float] = (0.25, 0.5, 0.75),
                      n_candidates: int | None = None, method: str = "cdf",
                      n_estimate: Any = None, public: GroupScales | None = None,
                      rng: RngLike = None) -> Release:
    """Quantiles per public group key, shape (groups, len(qs)); ε, or one ε per group."""
    return _quantiles(values, groups, group_keys, lower, upper, epsilon, qs, n_candidates,
                      method, n_estimate, public, rng)
