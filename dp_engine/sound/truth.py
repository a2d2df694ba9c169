"""The owner's true values, from the same aggregates the releases use (no rows needed).

Counts, means and variances are exact (means and variances of the values snapped to the
sums' lattice: within 2^-22 of the half range of the float statistics); quantiles are the
grid quantiles: the smallest candidate at or below which (values snapped down to the grid)
lie at least q·n records. Empty groups give NaN. Owner-only: these are not private-safe.
Realized noise uses the same definition of relative error as the band (``spread.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dp_engine.sound import quantile_mechanisms as qm
from dp_engine.sound.accuracy import relative_error
from dp_engine.sound.aggregates import CandidateCounts, CellCounts, MomentSums, lattice_plan
from dp_engine.sound.pilot import uniform_scales
from dp_engine.sound.release import Release
from dp_engine.sound.releases.common import public_from_params
from dp_engine.sound.spread import band_levels, error_scale, relative
from dp_engine.sound.statistic import Statistic


def true_counts(cells: CellCounts) -> np.ndarray:
    """(groups, cells) counts as floats."""
    return np.asarray(cells.counts, dtype=float)


def true_means(sums: MomentSums) -> np.ndarray:
    """(groups,) means of the clamped values; NaN for an empty group."""
    grid, _ = lattice_plan(sums.lower, sums.upper, sums.squares)
    n = np.asarray(sums.count, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        offset = np.asarray(sums.s1, dtype=float) * grid["sum"] / n
    return np.where(n > 0, (sums.lower + sums.upper) / 2.0 + offset, np.nan)


def true_variances(sums: MomentSums) -> np.ndarray:
    """(groups,) population variances (ddof 0) of the clamped values; NaN for an empty group."""
    if not sums.squares:
        raise ValueError("A variance needs moment sums with squares.")
    grid, _ = lattice_plan(sums.lower, sums.upper, True)
    half = (sums.upper - sums.lower) / 2.0
    n = np.asarray(sums.count, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        offset = np.asarray(sums.s1, dtype=float) * grid["sum"] / n
        second = np.asarray(sums.s2, dtype=float) * grid["sumsq"] / n + half * half / 2.0
    return np.where(n > 0, np.maximum(second - offset * offset, 0.0), np.nan)


def true_quantiles(cands: CandidateCounts, qs: Sequence[float]) -> np.ndarray:
    """(groups, levels) grid quantiles; NaN for an empty group."""
    idx = qm.true_indices(np.asarray(cands.counts), qs)
    grid = np.linspace(cands.lower, cands.upper, cands.n_candidates)
    return np.where(idx >= 0, grid[np.where(idx >= 0, idx, 0)], np.nan)


def realized_relative_error(release: Release, truth: np.ndarray) -> np.ndarray:
    """Per group, the owner's realized noise in percent (NaN for withheld / empty groups):
    counts against the counts; a mean, variance or box plot against the same public scale
    its band and stated error use (``spread.error_scale``)."""
    truth = np.asarray(truth, dtype=float)
    statistic = Statistic.of(release.statistic)
    if statistic.moments:
        truth = truth.reshape(-1, 1)
    est = np.asarray(release.value, dtype=float).reshape(truth.shape)
    if statistic.counts:
        return 100.0 * relative_error(est, truth)
    scale = public_scale(release, truth.shape[0])
    held = band_levels(release.params["qs"]) if statistic is Statistic.QUANTILES else \
        np.ones(truth.shape[-1], dtype=bool)
    return np.where(np.isfinite(truth).all(axis=-1),
                    relative(np.abs(est - truth)[..., held].mean(axis=-1), scale), np.nan)


def public_scale(release: Release, groups: int) -> np.ndarray:
    """(groups,) the public scale a mean, variance or quantile release states errors against:
    from its public sizes and pilot, else values spread evenly over its bounds."""
    public = public_from_params(release.params)
    if public is None:
        lower, upper = (float(release.params["lower"]), float(release.params["upper"]))
        public = uniform_scales(np.ones(groups), lower, upper)
    return np.broadcast_to(error_scale(release.statistic, public), (groups,))
