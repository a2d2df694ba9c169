"""The band holds per group (issue 10, must-show "Band").

For each paper preset (Fig. 2 histogram of Age by PI-RADS score, Fig. 3 mean Age by PI-RADS
score, Fig. 4 box plot of Age by prostatitis, Fig. 5 histogram of Age) and each role (noise
factor 0, 1, 2): every shown group's expected relative error lies in the role's band, and
the median of its realized relative error (the one definition of ``accuracy``) over 200
seeded releases lies in the band too.

Each of 5 "worlds" draws what a data set version's calibration draws once — the DP group
sizes and the pooled DP pilot, hence the plan — and then 40 releases at the least-noisy
(materialized) ε, refined to each role's ε as the service does: 200 releases per role in
all, vectorized. Relative errors are the one definition of ``spread.py`` (counts against the
counts, a mean against the group's public standard deviation, a box's median and quartiles
against its public 90 % range).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dp_engine.bands import band
from dp_engine.sound import (
    CandidateCounts,
    CellCounts,
    MomentSums,
    candidate_counts,
    cell_counts,
    moment_sums,
    pilot_edges,
    plan_tiers,
    pooled_scales,
    public_group_sizes,
    realized_relative_error,
    refine,
    release_counts,
    release_moments,
    release_quantiles,
    true_counts,
    true_means,
    true_quantiles,
)
from dp_engine.sound.pilot import CALIBRATION_PILOT_EPSILON, CALIBRATION_SIZE_EPSILON
from dp_engine.sound.plan import BOX_QS

ROOT = Path(__file__).resolve().parents[2]
WORLDS, PER_WORLD = 5, 40
EDGES = pilot_edges(20, 100, 5)
PRESETS = {   # services/views/queries.py PRESETS
    "fig2": ("histogram", "PIRADS score", [1.0, 2.0, 3.0, 4.0, 5.0]),
    "fig3": ("mean", "PIRADS score", [1.0, 2.0, 3.0, 4.0, 5.0]),
    "fig4": ("quantiles", "Prostatitis", ["n", "chr", "y", "acute", "acute on chronic"]),
    "fig5": ("histogram", None, None),
}


@pytest.fixture(scope="module")
def cohort() -> pd.DataFrame:
    return pd.read_csv(ROOT / "sample_data" / "pirads_cohort.csv")


def public_scales(frame, column, keys, rng):
    """What the service's calibration releases once per data set version: DP sizes of the
    grouping and the pooled DP pilot of Age (services/views/inputs.py)."""
    if column is None:
        sizes = CellCounts(np.array([[frame["Age"].notna().sum()]]))
    else:
        sizes = CellCounts(cell_counts(frame[column].dropna(), keys).counts.T)
    n_hat = public_group_sizes(release_counts(sizes, CALIBRATION_SIZE_EPSILON, rng=rng,
                                              statistic="count", group_keys=keys))
    pilot = release_counts(cell_counts(frame["Age"], EDGES), CALIBRATION_PILOT_EPSILON,
                           rng=rng)
    return pooled_scales(pilot, EDGES, n_hat)


def aggregates_and_truth(frame, statistic, column, keys):
    sub = frame[["Age"] + ([column] if column else [])].dropna()
    groups = None if column is None else sub[column]
    if statistic == "histogram":
        agg = cell_counts(sub["Age"], EDGES, groups=groups, group_keys=keys)
        return agg, true_counts(agg)
    if statistic == "mean":
        agg = moment_sums(sub["Age"], 20, 100, squares=False, groups=groups, group_keys=keys)
        return agg, true_means(agg)
    agg = candidate_counts(sub["Age"], 20, 100, 1001, groups=groups, group_keys=keys)
    return agg, true_quantiles(agg, BOX_QS)


def tiled_release(statistic, agg, eps, plan, scales, rng):
    """PER_WORLD releases of every group in one call (replicas as groups), labelled with the
    world's public scales as the service labels them."""
    n = PER_WORLD
    keys = list(range(n * eps.size))
    e = np.tile(eps, n)
    public = scales.take(np.tile(np.arange(eps.size), n))
    if statistic == "histogram":
        return release_counts(CellCounts(np.tile(agg.counts, (n, 1))), e, rng=rng,
                              group_keys=keys, bins=EDGES, public=public)
    if statistic == "mean":
        tiled = MomentSums(agg.lower, agg.upper, np.tile(agg.count, n), np.tile(agg.s1, n))
        return release_moments(tiled, e, rng=rng, group_keys=keys, public=public)
    tiled = CandidateCounts(agg.lower, agg.upper, agg.n_candidates, np.tile(agg.counts, (n, 1)))
    return release_quantiles(tiled, e, qs=BOX_QS, rng=rng, group_keys=keys,
                             n_candidates=np.tile(plan.n_candidates, n), public=public)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_shown_group_meets_its_band(cohort, preset):
    statistic, column, keys = PRESETS[preset]
    agg, truth = aggregates_and_truth(cohort, statistic, column, keys)
    n_groups = 1 if keys is None else len(keys)
    realized = {t: [] for t in (0, 1, 2)}
    for world in range(WORLDS):
        rng = np.random.default_rng(9000 + world)
        scales = public_scales(cohort, column, keys, rng)
        tiers = plan_tiers(statistic, scales, bins=EDGES, qs=BOX_QS)
        base = tiled_release(statistic, agg, tiers.materialize, tiers.tiers[0], scales, rng)
        for t, plan in tiers.tiers.items():
            lo, hi = band(t)
            shown = plan.shown
            assert np.all(plan.expected_relative_error[shown] <= hi), (preset, t, plan)
            assert np.all(plan.expected_relative_error[shown] >= lo), (preset, t, plan)
            eps = np.tile(plan.epsilon, PER_WORLD)
            same = np.array_equal(np.nan_to_num(plan.epsilon), np.nan_to_num(tiers.materialize))
            rel = base if same else refine(base, eps, rng=rng)
            err = realized_relative_error(rel, np.tile(truth, (PER_WORLD, 1)) if truth.ndim == 2
                                          else np.tile(truth, PER_WORLD))
            realized[t].append(err.reshape(PER_WORLD, n_groups))
    for t in (0, 1, 2):
        lo, hi = band(t)
        errs = np.vstack(realized[t])                       # (200, groups), NaN when withheld
        for g in range(n_groups):
            seen = errs[:, g][np.isfinite(errs[:, g])]
            if seen.size >= PER_WORLD:                       # shown in at least one world
                assert lo <= np.median(seen) <= hi, (preset, t, g, np.median(seen), seen.size)
    assert any(np.isfinite(np.vstack(realized[t])).any() for t in (0, 1, 2))
