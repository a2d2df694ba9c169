"""Public scales for calibration: DP group sizes and a DP pilot of each group's distribution.

The relative error of a mean, median or variance is measured against the statistic's own
value, which is private. Calibration therefore uses public stand-ins only:

* **group sizes n̂_g**: one grouped DP count per (dataset version, grouping column), a
  ``CellCounts`` release at a small ε (``group_size_epsilon``) turned into public sizes by
  ``public_group_sizes``. Never the true sizes.
* **a pilot**: a grouped DP histogram of the column on a public grid (``pilot_edges``),
  released once per (dataset version, column, grouping column) at ``PILOT_EPSILON``. Each
  group's shape is its own noisy histogram shrunk towards the pooled one in proportion to
  the noise it carries (``scales_from_pilot``), so a small group borrows the pooled shape
  and a large one keeps its own. Post-processing of a DP release: public.

``GroupScales`` holds both and answers what calibration and the error labels need: each
group's size, mean, variance and quantiles, and a proxy data set (n̂_g typical points of
the estimated shape) on which the error of a quantile mechanism is simulated. Without a
pilot the shape is uniform over the bounds (stated as such).

Both internal releases count towards the dataset's privacy loss (not a role's budget).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dp_engine.errors import DataTypeError
from dp_engine.sound.accuracy import dlap_half_width
from dp_engine.sound.aggregates import candidate_counts
from dp_engine.sound.release import Release
from dp_engine.sound.validation import check_bounds

PILOT_EPSILON = 0.5
"""ε of a pilot: per cell noise E|Z| ≈ 1.9 records, so groups of ~100+ keep their own shape."""
CALIBRATION_SIZE_EPSILON = 0.25
"""ε of one grouping's DP sizes when a dataset version is calibrated (E|Z| ≈ 10 records)."""
CALIBRATION_PILOT_EPSILON = 0.1
"""ε of one column's pooled pilot when a dataset version is calibrated."""
PILOT_CELLS = 16
PROXY_POINTS = 20_000
SIZE_SMALLEST_GROUP = 50
SIZE_PRECISION = 0.1


@lru_cache(maxsize=64)
def group_size_epsilon(smallest_group: float = SIZE_SMALLEST_GROUP,
                       precision: float = SIZE_PRECISION, level: float = 0.95,
                       contribution: int = 1) -> float:
    """The smallest ε whose DP count is within ``precision`` of a group of ``smallest_group``.

    With probability ``level`` the count's error is at most precision·smallest_group
    records. The error of a mean or histogram scales as 1/n, so this bounds how far a
    group's stated error can be off because of its DP size. Defaults (50 records, 10 %):
    ε ≈ 0.6; contributions of k rows per patient multiply it by k. Memoized: every quote
    asks it, and it is a pure function of its arguments.
    """
    target = precision * smallest_group
    if not target > 0:
        raise DataTypeError("The size precision and the smallest group must be positive.")
    lo, hi = 1e-4, 50.0
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if dlap_half_width(contribution / mid, level) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def public_group_sizes(sizes: Release) -> np.ndarray:
    """n̂_g ≥ 0 per group from a DP count (a grouped ``release_counts`` with one cell each).

    Post-processing only: the released, rounded, clamped counts. Withheld groups: NaN.
    """
    value = np.asarray(sizes.value, dtype=float)
    return np.maximum(value.reshape(value.shape[0] if value.ndim else 1, -1)[:, 0], 0.0)


def pilot_edges(lower: float, upper: float, bin_width: float | None = None,
                max_cells: int = 40) -> np.ndarray:
    """The pilot's public grid: the schema's bins when there are at most ``max_cells`` of
    them, else ``PILOT_CELLS`` equal cells over [lower, upper]."""
    lower, upper = check_bounds(lower, upper)
    if bin_width and bin_width > 0 and (upper - lower) / bin_width <= max_cells:
        cells = max(1, int(round((upper - lower) / bin_width)))
    else:
        cells = PILOT_CELLS
    return np.linspace(lower, upper, cells + 1)


@dataclass(frozen=True)
class GroupScales:
    """Public knowledge of each group: DP size n̂_g and an estimated shape on public cells."""

    n_hat: np.ndarray                 # (groups,), public sizes (≥ 0)
    lower: float
    upper: float
    edges: np.ndarray                 # public cell edges over [lower, upper]
    shape: np.ndarray                 # (groups, cells), rows sum to 1
    source: str = "uniform over the bounds (no pilot)"

    @property
    def groups(self) -> int:
        return int(self.n_hat.size)

    def _mids(self) -> np.ndarray:
        return (self.edges[:-1] + self.edges[1:]) / 2.0

    def mean(self) -> np.ndarray:
        """Each group's estimated mean (piecewise-uniform shape)."""
        return self.shape @ self._mids()

    def variance(self) -> np.ndarray:
        """Each group's estimated variance (piecewise-uniform shape, ddof 0)."""
        mids, widths = self._mids(), np.diff(self.edges)
        second = self.shape @ (mids**2 + widths**2 / 12.0)
        return np.maximum(second - self.mean() ** 2, 0.0)

    def quantiles(self, qs: Sequence[float]) -> np.ndarray:
        """(groups, levels): the estimated shape's quantiles (linear inside a cell)."""
        return np.asarray([_quantiles_one(row, self.edges, np.asarray(qs, dtype=float))
                           for row in self.shape]).reshape(self.groups, len(qs))

    def proxy_candidates(self, n_candidates: int) -> np.ndarray:
        """(groups, c + 1) candidate counts of each group's proxy points.

        Past ``PROXY_POINTS`` points the counts of that many points are scaled up (float
        counts): the gaps between data points no longer matter at that size.
        """
        rows = []
        for g in range(self.groups):
            n = max(float(self.n_hat[g]), 1.0)
            m = int(min(round(n), PROXY_POINTS))
            pts = _quantiles_one(self.shape[g], self.edges, (np.arange(m) + 0.5) / m)
            row = candidate_counts(pts, self.lower, self.upper, n_candidates).counts[0]
            rows.append(row * (n / m) if m < round(n) else row)
        return np.asarray(rows, dtype=float)

    def take(self, index: np.ndarray) -> GroupScales:
        """The scales of a subset (or repetition) of the groups."""
        return GroupScales(self.n_hat[index], self.lower, self.upper, self.edges,
                           self.shape[index], self.source)


def _quantiles_one(shape: np.ndarray, edges: np.ndarray, qs: np.ndarray) -> np.ndarray:
    cum = np.concatenate([[0.0], np.cumsum(shape)])
    xs, idx = np.unique(cum, return_index=True)
    return np.interp(qs, xs, edges[idx])


def uniform_scales(n_hat, lower: float, upper: float, cells: int = PILOT_CELLS) -> GroupScales:
    """Public scales without a pilot: every group spread evenly over the bounds."""
    lower, upper = check_bounds(lower, upper)
    n = np.maximum(np.atleast_1d(np.asarray(n_hat, dtype=float)), 0.0)
    shape = np.full((n.size, cells), 1.0 / cells)
    return GroupScales(n, lower, upper, np.linspace(lower, upper, cells + 1), shape)


def scales_from_pilot(pilot: Release, edges: np.ndarray, n_hat) -> GroupScales:
    """Public scales from a pilot release (a grouped DP histogram on ``edges``) and n̂_g.

    Group g's shape: (v_g + m_g·p_pool)/(Σ v_g + m_g), where v_g are its released (clamped)
    counts, p_pool the pooled released shape and m_g = cells · E|noise| the noise mass of
    its row: a group whose counts are mostly noise takes the pooled shape.
    """
    edges = np.asarray(edges, dtype=float)
    counts = np.asarray(pilot.value, dtype=float).reshape(-1, edges.size - 1)
    n = np.maximum(np.atleast_1d(np.asarray(n_hat, dtype=float)), 0.0)
    if counts.shape[0] != n.size:
        raise DataTypeError(
            f"The pilot has {counts.shape[0]} groups but {n.size} group sizes were given."
        )
    counts = np.where(np.isfinite(counts), np.maximum(counts, 0.0), 0.0)
    cells = counts.shape[1]
    pooled = counts.sum(axis=0)
    p_pool = pooled / pooled.sum() if pooled.sum() > 0 else np.full(cells, 1.0 / cells)
    t = np.broadcast_to(np.asarray(pilot.scales["count"], dtype=float), (n.size,))
    a = np.exp(-1.0 / np.where(np.isfinite(t), t, 1.0))
    noise_mass = cells * 2.0 * a / (1.0 - a * a)
    shape = (counts + noise_mass[:, None] * p_pool) / (counts.sum(axis=1) + noise_mass)[:, None]
    lower, upper = float(edges[0]), float(edges[-1])
    return GroupScales(n, lower, upper, edges, shape,
                       f"DP pilot histogram at ε = {pilot.epsilon:g}, shrunk to the pooled shape")


def pooled_scales(pilot: Release, edges: np.ndarray, n_hat) -> GroupScales:
    """Public scales where every group takes the shape of one pooled (ungrouped) pilot.

    The pilot's noisy counts lose the noise's expected positive part E[max(Z, 0)] before the
    clamp at 0, so empty cells do not pile up spurious mass in the tails (which would widen
    every spread). Post-processing of a DP release: public.
    """
    edges = np.asarray(edges, dtype=float)
    counts = np.asarray(pilot.value, dtype=float).reshape(-1)
    if counts.size != edges.size - 1:
        raise DataTypeError("A pooled pilot has one row of counts on the given edges.")
    t = float(np.asarray(pilot.scales["count"], dtype=float).reshape(-1)[0])
    a = math.exp(-1.0 / t) if math.isfinite(t) and t > 0 else 0.0
    positive = a / (1.0 - a * a)                      # E[max(Z, 0)] of discrete Laplace
    counts = np.maximum(np.where(np.isfinite(counts), counts, 0.0) - positive, 0.0)
    cells = counts.size
    shape = counts / counts.sum() if counts.sum() > 0 else np.full(cells, 1.0 / cells)
    n = np.maximum(np.atleast_1d(np.asarray(n_hat, dtype=float)), 0.0)
    return GroupScales(n, float(edges[0]), float(edges[-1]), edges,
                       np.tile(shape, (n.size, 1)),
                       f"DP pooled pilot histogram at ε = {pilot.epsilon:g}")
