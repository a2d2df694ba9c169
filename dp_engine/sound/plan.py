"""Per-group ε: each group's expected error in the role's band, under a per-view ceiling.

Groups partition the patients, so each group may get its own ε_g and a view costs
max_g ε_g (parallel composition). ε_g is chosen from PUBLIC inputs only: the DP group size
n̂_g and the pilot shape (``pilot.GroupScales``), the bounds, bins and grid, never the true
sizes or values. For each group the error model gives, as functions of ε, the expected
relative error E (the stated number) and the median relative error M (what a typical
release realizes); both fall as ε grows.

* band (lo, hi) with lo > 0: ε_g centres the band on [M, E] in log scale (E·M = lo·hi), so
  both keep the same margin to its ends;
* band (0, hi): ε_g gives E = ``LOW_BAND_TARGET``·hi (a margin for the public estimates);
* relative errors are against the group's public scale (``spread.py``: counts against the
  counts, a mean against the group's standard deviation, a box plot against its 90 % range);
* if that ε_g exceeds the role's ceiling, the ceiling is used when E ≤ 0.9·hi still holds
  there (``CEILING_MARGIN``); otherwise the group is WITHHELD (``WITHHELD_REASON``: too few
  patients): it gets no draw and is never shown as a number;
* never withheld for being too accurate: a group that would be more accurate than the band
  gets a smaller ε, i.e. noise added up to the band (the ε search reaches ``EPS_FLOOR``);
* a shown group must also be informative: E at most ``INFORMATIVE`` times the error of a
  release that reads (almost) no data (E at the grid's smallest ε). Quantile errors saturate
  on a bounded range, so ε_g is never lowered below the informative level, and a group that
  cannot be informative under the ceiling is withheld (too few patients).

``plan_tiers`` plans the three tiers and nests them per group (ε⁰_g ≥ ε¹_g ≥ ε²_g), and
``TierPlan.materialize`` gives the ε per group of the least-noisy release the others refine.
The accuracy argument and the defaults are in docs/accuracy.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dp_engine.bands import band as band_of
from dp_engine.errors import UnknownQueryError
from dp_engine.rng import RngLike
from dp_engine.sound.aggregates import CellCounts
from dp_engine.sound.pilot import PILOT_EPSILON, GroupScales, group_size_epsilon
from dp_engine.sound.release import Release
from dp_engine.sound.releases import (
    FINE_CANDIDATES,
    candidates_for,
    count_cell_error,
    expected_quantile_error,
    moment_error,
    moment_noise,
    release_counts,
    same_edges,
)
from dp_engine.sound.releases.common import total_epsilon
from dp_engine.sound.releases.quantile_bank import banked_quantile_error
from dp_engine.sound.spread import band_levels, error_scale, relative
from dp_engine.sound.statistic import Statistic

DEFAULT_CEILINGS: Mapping[int, float] = {0: 8.0, 1: 2.0, 2: 2.0}
"""ε ceiling per view for noise factor 0 (owner), 1 (collaborator), 2 (third party)."""
LOW_BAND_TARGET = 0.7
INFORMATIVE = 0.9
"""A shown group's expected error is at most this fraction of the data-free error."""
FLOOR_MARGIN = 0.95
"""ε is raised to where E is this fraction of the informative limit: the curves interpolate,
so aiming exactly at the limit would leave half the groups just above it."""
CEILING_MARGIN = 0.9
"""A group that reaches the band only at the ceiling must do so with this margin."""
WITHHELD_REASON = "too few patients to show at this noise level"
"""The one reason a group is withheld: even at the role's per-view ceiling its error would
be wider than the band (or no better than a guess from the public range)."""
EPS_FLOOR = 1e-7
QUANTILE_EPS_FLOOR = 1e-4
"""The smallest ε searched: low enough that even a very large group can be given noise up
to its band (so a group is never withheld, nor shown better than asked, for being large)."""
POLISH_STEPS = 6
GRID_POINTS = 56
QUANTILE_GRID_POINTS = 16
QUANTILE_RUNS = 128
BOX_QS = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class GroupPlan:
    """The ε of every group of one view at one noise factor (NaN: withheld)."""

    statistic: str
    noise_factor: int
    band: tuple[float, float]
    ceiling: float
    epsilon: np.ndarray                      # (groups,), NaN where withheld
    expected_error: np.ndarray               # (groups,) mean absolute error over cells
    expected_relative_error: np.ndarray      # (groups,) percent
    median_relative_error: np.ndarray        # (groups,) percent, the model's typical release
    reasons: tuple[str, ...]                 # "" for a shown group
    n_candidates: np.ndarray | None = None   # quantiles: each group's grid (pass it on)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def shown(self) -> np.ndarray:
        return np.isfinite(self.epsilon)

    @property
    def withheld(self) -> np.ndarray:
        return ~self.shown

    @property
    def view_epsilon(self) -> float:
        """What the view costs: max over shown groups (0 when every group is withheld)."""
        return total_epsilon(self.epsilon)


@dataclass(frozen=True)
class TierPlan:
    """Plans for the three tiers, nested per group."""

    tiers: Mapping[int, GroupPlan]

    @property
    def materialize(self) -> np.ndarray:
        """ε per group of the least-noisy release (max over tiers that show it; NaN: none)."""
        stack = np.vstack([p.epsilon for p in self.tiers.values()])
        with np.errstate(all="ignore"):
            out = np.nanmax(np.where(np.isfinite(stack), stack, -np.inf), axis=0)
        return np.where(np.isfinite(out), out, np.nan)


# ---------------------------------------------------------------- the public inputs


def release_group_sizes(group_counts: CellCounts, group_keys: Sequence[Any], *,
                        epsilon: float | None = None, rng: RngLike = None) -> Release:
    """The DP group sizes of one grouping column (released once per dataset version).

    ``group_counts``: records per group label, as the histogram of the grouping column
    (shape (1, groups)) or one cell per group (shape (groups, 1)). ε defaults to
    ``group_size_epsilon`` for the counts' contribution k. ``public_group_sizes`` of the
    result gives n̂_g. Charge it to the dataset's loss, not to a role.
    """
    counts = np.asarray(group_counts.counts)
    if counts.shape[0] == 1 and counts.shape[1] == len(group_keys) and len(group_keys) > 1:
        counts = counts.T
    k = int(group_counts.contribution)
    eps = group_size_epsilon(contribution=k) if epsilon is None else epsilon
    return release_counts(CellCounts(counts, k), eps, rng=rng, statistic="count",
                          group_keys=list(group_keys))


def release_pilot(cells: CellCounts, edges: np.ndarray, group_keys: Sequence[Any] | None, *,
                  epsilon: float = PILOT_EPSILON, rng: RngLike = None) -> Release:
    """The DP pilot: the column's grouped histogram on ``pilot_edges`` (once per dataset
    version, column and grouping column). ``scales_from_pilot(pilot, edges, n_hat)`` turns it
    into the public scales. Charge it to the dataset's loss, not to a role."""
    return release_counts(cells, epsilon, rng=rng, bins=np.asarray(edges, dtype=float),
                          group_keys=None if group_keys is None else list(group_keys))


# ---------------------------------------------------------------- error models


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


def error_curves(statistic: str, eps: np.ndarray, scales: GroupScales, *, bins: Any = None,
                 qs: Sequence[float] = BOX_QS, contribution: int = 1, method: str = "cdf",
                 n_candidates: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E absolute, E relative %, M relative %) at ε, shape (groups, K) for eps (groups, K)."""
    statistic = Statistic.of(statistic)
    eps = np.asarray(eps, dtype=float)
    n = np.maximum(scales.n_hat, 1.0)[:, None]
    k = float(contribution)
    if statistic.counts:
        cells = 1 if statistic is Statistic.COUNT else n_bins(bins)
        t = k / eps
        if statistic is Statistic.HISTOGRAM and same_edges(scales, bins, cells):
            expected = scales.n_hat[:, None] * scales.shape          # public cell counts
            e_abs = count_cell_error(t[:, :, None], expected[:, None, :]).mean(axis=2)
        else:
            e_abs = count_cell_error(t, np.inf)
        # |Laplace| is exponential: the mean of m cells' |noise| is Gamma(m)/m
        from scipy import special  # here, not at import: the app starts without it

        ratio = special.gammaincinv(cells, 0.5) / cells
        scale = n / cells
        return e_abs, 100.0 * e_abs / scale, 100.0 * ratio * e_abs / scale
    lower, upper = scales.lower, scales.upper
    if statistic.moments:
        mean_p, var_p = scales.mean()[:, None], scales.variance()[:, None]
        sc, _, _ = moment_noise(lower, upper, eps, statistic, contribution)
        e_abs = moment_error(statistic, sc, lower, upper, mean_p, var_p, n)
        m_abs = moment_error(statistic, sc, lower, upper, mean_p, var_p, n, 0.5)
        target = error_scale(statistic, scales)[:, None]
        return e_abs, relative(e_abs, target), relative(m_abs, target)
    spread = error_scale(statistic, scales)      # quantiles
    box = band_levels(qs)
    err, rel, med = [], [], []
    for j in range(eps.shape[1]):         # the grid follows n̂_g·ε unless it is fixed
        c = candidates_for(scales.n_hat, FINE_CANDIDATES, method, eps[:, j]) \
            if n_candidates is None else n_candidates
        if method == "cdf":      # the same simulation, its noise drawn once per grid
            e, r, m = banked_quantile_error(scales, eps[:, j], qs, contribution, c,
                                            runs=QUANTILE_RUNS, band_only=True)
        else:
            e, r, m = expected_quantile_error(scales, eps[:, j], qs, contribution, method,
                                              c, runs=QUANTILE_RUNS)
        e_rel = relative(e[..., box].mean(axis=-1), spread)
        # the model's median/mean ratio does not depend on the scale it is stated against
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(r > 0, m / np.where(r > 0, r, 1.0), 1.0)
        err.append(e[..., box].mean(axis=-1))
        rel.append(e_rel)
        med.append(e_rel * ratio)
    return np.stack(err, axis=1), np.stack(rel, axis=1), np.stack(med, axis=1)


# ---------------------------------------------------------------- planning


def _crossing(x: np.ndarray, y: np.ndarray, target: Any) -> np.ndarray:
    """Per row, the log-interpolated x where decreasing y first falls to ``target`` (a number
    or one per row; NaN: never)."""
    out = np.full(y.shape[0], np.nan)
    ly = np.log(np.maximum(y, 1e-300))
    targets = np.log(np.maximum(np.broadcast_to(np.asarray(target, float), (y.shape[0],)),
                                1e-300))
    for i in range(y.shape[0]):
        lt = targets[i]
        below = np.flatnonzero(ly[i] <= lt)
        if below.size == 0:
            continue
        j = below[0]
        if j == 0:
            out[i] = x[i, 0]
            continue
        y0, y1 = ly[i, j - 1], ly[i, j]
        w = (y0 - lt) / (y0 - y1) if y0 != y1 else 1.0
        out[i] = math.exp(math.log(x[i, j - 1]) + w * (math.log(x[i, j]) - math.log(x[i, j - 1])))
    return out


def plan_groups(statistic: str, noise_factor: int, scales: GroupScales, *,
                ceiling: float | None = None, bins: Any = None,
                qs: Sequence[float] = BOX_QS, contribution: int = 1, method: str = "cdf",
                n_candidates: Any = None) -> GroupPlan:
    """ε per group so that its expected error lies in the band (see the module doc).

    ``scales`` must be public (DP group sizes, DP pilot); ``ceiling`` defaults to
    ``DEFAULT_CEILINGS[noise_factor]``. For quantiles, ``plan.n_candidates`` is each group's
    grid, which the release must use (``release_quantiles(..., n_candidates=...)``); pass
    ``n_candidates`` to plan on fixed grids (``plan_tiers`` does, for nested tiers).
    """
    statistic = Statistic.of(statistic)
    lo, hi = band_of(noise_factor)
    cap = float(DEFAULT_CEILINGS[int(noise_factor)] if ceiling is None else ceiling)
    g = scales.groups
    c = n_candidates
    quantiles = statistic is Statistic.QUANTILES
    points = QUANTILE_GRID_POINTS if quantiles else GRID_POINTS
    grid = np.geomspace(QUANTILE_EPS_FLOOR if quantiles else EPS_FLOOR, cap, points)
    eps_grid = np.broadcast_to(grid, (g, points)).copy()
    kwargs = dict(bins=bins, qs=qs, contribution=contribution, method=method, n_candidates=c)
    _, e_rel, m_rel = error_curves(statistic, eps_grid, scales, **kwargs)
    informative = INFORMATIVE * e_rel[:, 0]      # E of an (almost) data-free release
    floor = _crossing(eps_grid, e_rel, informative * FLOOR_MARGIN)
    floor = np.where(np.isfinite(floor), floor, np.inf)
    if lo > 0:
        target = _crossing(eps_grid, e_rel * m_rel, lo * hi)
    else:
        target = _crossing(eps_grid, e_rel, LOW_BAND_TARGET * hi)
    target = np.maximum(target, floor)
    # the ceiling may still meet the band, with less margin
    meets_at_cap = e_rel[:, -1] <= hi * CEILING_MARGIN
    eps = np.where(np.isfinite(target), target, np.where(meets_at_cap, cap, np.nan))
    eps = np.where((eps > cap) | ~np.isfinite(eps), np.where(meets_at_cap, cap, np.nan), eps)
    eps = np.where(np.asarray(scales.n_hat) > 0, eps, np.nan)
    at = np.where(np.isfinite(eps), eps, cap)
    fixed_grid = c is not None
    limit = informative
    for _ in range(POLISH_STEPS):     # the curves interpolate: check the chosen ε, nudge it
        if quantiles and not fixed_grid:
            c = candidates_for(scales.n_hat, FINE_CANDIDATES, method, at)
            kwargs["n_candidates"] = c
        e_abs, e_rel_at, m_rel_at = error_curves(statistic, at[:, None], scales, **kwargs)
        if quantiles:    # informative on the grid the release will use (checked below)
            limit = np.minimum(informative, INFORMATIVE * _data_free(statistic, grid[0],
                                                                     scales, kwargs))
        # above the band, or no better than a release that reads no data: less noise
        high = np.isfinite(eps) & ((e_rel_at[:, 0] > hi) | (e_rel_at[:, 0] > limit)) \
            & (at < cap)
        low = np.isfinite(eps) & (m_rel_at[:, 0] < lo) & ~high
        if not (high.any() or low.any()):
            break
        at = np.where(high, np.minimum(at * 1.15, cap), np.where(low, at / 1.15, at))
        at = np.maximum(at, np.minimum(floor, cap))
        eps = np.where(np.isfinite(eps), at, eps)
    e_at = e_rel_at[:, 0]
    if quantiles:    # data-free error on the grid the release will use
        informative = np.minimum(informative, INFORMATIVE * _data_free(statistic, grid[0],
                                                                       scales, kwargs))
    # never withheld for being too accurate: the polish above lowers ε (adds noise) towards
    # the band, down to the informative floor; only too few patients withhold a group
    shown = np.isfinite(eps) & (e_at <= hi * (1 + 1e-9)) & (e_at <= informative * (1 + 1e-9))
    eps = np.where(shown, eps, np.nan)
    reasons = tuple("" if s else WITHHELD_REASON for s in shown)
    return GroupPlan(statistic, int(noise_factor), (lo, hi), cap, eps, e_abs[:, 0],
                     e_rel_at[:, 0], m_rel_at[:, 0], reasons,
                     None if c is None else np.broadcast_to(np.asarray(c), (g,)).copy())


def plan_tiers(statistic: str, scales: GroupScales, *,
               ceilings: Mapping[int, float] | None = None, **kwargs: Any) -> TierPlan:
    """Plans for noise factors 0, 1, 2, nested: ε⁰_g ≥ ε¹_g ≥ ε²_g wherever shown.

    Quantiles: the noisier tiers refine the least-noisy release and keep its grid, so every
    tier is planned again on the grid that the materialized ε gives each group.
    """
    caps = dict(DEFAULT_CEILINGS if ceilings is None else ceilings)
    plans = {t: plan_groups(statistic, t, scales, ceiling=caps[t], **kwargs) for t in (0, 1, 2)}
    if Statistic.of(statistic) is Statistic.QUANTILES and kwargs.get("n_candidates") is None:
        mat = TierPlan(plans).materialize
        grid = candidates_for(scales.n_hat, FINE_CANDIDATES, kwargs.get("method", "cdf"),
                              np.where(np.isfinite(mat), mat, caps[0]))
        plans = {t: plan_groups(statistic, t, scales, ceiling=caps[t], n_candidates=grid,
                                **kwargs) for t in (0, 1, 2)}
    for t in (1, 2):
        above = plans[t - 1].epsilon
        mine = plans[t].epsilon
        clash = np.isfinite(above) & np.isfinite(mine) & (mine > above)
        if clash.any():   # a noisier tier never gets a larger ε than the tier it refines
            fixed = np.where(clash, above, mine)
            plans[t] = _replan(plans[t], fixed, scales, statistic, kwargs)
    return TierPlan(plans)


def _data_free(statistic: str, eps: float, scales: GroupScales,
               kwargs: Mapping[str, Any]) -> np.ndarray:
    """Each group's relative error at the smallest ε (a release that reads almost no data)."""
    return error_curves(statistic, np.full((scales.groups, 1), eps), scales, **kwargs)[1][:, 0]


def _replan(plan: GroupPlan, eps: np.ndarray, scales: GroupScales, statistic: str,
            kwargs: Mapping[str, Any]) -> GroupPlan:
    """The same plan at the given ε (errors recomputed; groups out of band withheld)."""
    lo, hi = plan.band
    at = np.where(np.isfinite(eps), eps, plan.ceiling)[:, None]
    opts = {k: v for k, v in kwargs.items() if k in ("bins", "qs", "contribution", "method")}
    opts.pop("n_candidates", None)
    e_abs, e_rel, m_rel = error_curves(statistic, at, scales, n_candidates=plan.n_candidates,
                                       **opts)
    shown = np.isfinite(eps) & (e_rel[:, 0] <= hi * (1 + 1e-9))
    eps = np.where(shown, eps, np.nan)
    reasons = tuple("" if s else WITHHELD_REASON for s in shown)
    return GroupPlan(plan.statistic, plan.noise_factor, plan.band, plan.ceiling, eps,
                     e_abs[:, 0], e_rel[:, 0], m_rel[:, 0], reasons, plan.n_candidates)
