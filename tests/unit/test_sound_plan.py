"""Per-group calibration: DP group sizes, the DP pilot, plans per role and nested tiers."""

from __future__ import annotations

import numpy as np
import pytest

from dp_engine.bands import band
from dp_engine.sound import (
    DEFAULT_CEILINGS,
    PILOT_EPSILON,
    WITHHELD_REASON,
    CellCounts,
    GroupScales,
    cell_counts,
    group_size_epsilon,
    pilot_edges,
    plan_groups,
    plan_tiers,
    public_group_sizes,
    release_counts,
    release_group_sizes,
    release_pilot,
    scales_from_pilot,
    uniform_scales,
)
from dp_engine.sound.accuracy import dlap_half_width
from dp_engine.sound.releases import candidates_for

EDGES = pilot_edges(20, 100, 5)


def normal_scales(n_hat) -> GroupScales:
    """Public scales of ages ~ N(65, 10) in each group (as a pilot would estimate them)."""
    mids = (EDGES[:-1] + EDGES[1:]) / 2
    shape = np.exp(-0.5 * ((mids - 65) / 10) ** 2)
    n = np.asarray(n_hat, dtype=float)
    return GroupScales(n, 20.0, 100.0, EDGES, np.tile(shape / shape.sum(), (n.size, 1)))


def test_group_size_epsilon_meets_its_precision():
    eps = group_size_epsilon()
    assert 0.3 < eps < 1.0
    assert dlap_half_width(1 / eps, 0.95) <= 0.1 * 50
    assert dlap_half_width(1 / (0.9 * eps), 0.95) > 0.1 * 50      # the smallest such ε
    assert group_size_epsilon(smallest_group=200) < eps
    assert group_size_epsilon(contribution=3) == pytest.approx(3 * eps, rel=1e-3)


def test_public_group_sizes_are_the_released_counts():
    rel = release_counts(CellCounts(np.array([[0], [40], [900]])), 0.5, statistic="count",
                         group_keys=["a", "b", "c"], rng=np.random.default_rng(1))
    n_hat = public_group_sizes(rel)
    assert n_hat.tolist() == np.maximum(rel.value, 0).tolist() and (n_hat >= 0).all()


def test_pilot_edges_follow_the_schema_bins_when_few():
    assert pilot_edges(20, 100, 5).size == 17
    assert pilot_edges(0, 1000, 1).size == 17                   # 1000 bins: 16 equal cells
    assert pilot_edges(0, 10).tolist() == np.linspace(0, 10, 17).tolist()


def test_the_pilot_shape_is_shrunk_to_the_pooled_one_by_its_noise():
    big = np.zeros(16)
    big[8] = 5000.0
    small = np.zeros(16)
    small[2] = 3.0
    pilot = release_counts(CellCounts(np.array([big, small, big], dtype=np.int64)), 0.5,
                           bins=EDGES, group_keys=[0, 1, 2], rng=np.random.default_rng(2))
    scales = scales_from_pilot(pilot, EDGES, [5000, 3, 5000])
    assert scales.shape[0, 8] > 0.99                            # a large group keeps its own
    assert scales.shape[1, 8] > scales.shape[1, 2]              # a tiny one takes the pooled
    assert np.allclose(scales.shape.sum(axis=1), 1.0)
    assert scales.mean()[0] == pytest.approx(62.5, abs=0.5)


@pytest.mark.parametrize("statistic", ["histogram", "mean", "variance", "quantiles", "count"])
def test_plans_meet_the_band_under_the_ceiling_or_withhold(statistic):
    scales = normal_scales([3, 40, 400, 4000])
    for factor in (0, 1, 2):
        lo, hi = band(factor)
        plan = plan_groups(statistic, factor, scales, bins=EDGES)
        shown = plan.shown
        assert (plan.epsilon[shown] <= DEFAULT_CEILINGS[factor] + 1e-12).all()
        assert (plan.expected_relative_error[shown] <= hi).all()
        if lo > 0:
            assert (plan.median_relative_error[shown] >= lo).all()
        assert plan.view_epsilon == (plan.epsilon[shown].max() if shown.any() else 0.0)
        assert all((r == "") == s for r, s in zip(plan.reasons, shown, strict=True))
        assert WITHHELD_REASON in plan.reasons or shown.all()
    tiny = plan_groups(statistic, 0, normal_scales([3]), bins=EDGES, ceiling=0.01)
    assert tiny.withheld.all() and tiny.view_epsilon == 0.0


def test_larger_groups_need_less_epsilon_and_tiers_nest():
    scales = normal_scales([60, 250, 1000])
    tiers = plan_tiers("mean", scales)
    e = np.vstack([tiers.tiers[t].epsilon for t in (0, 1, 2)])
    assert (np.diff(e, axis=1) < 0).all()                       # more records, less ε
    assert (np.diff(e, axis=0) <= 0).all()                      # noisier tier, less ε
    assert np.array_equal(tiers.materialize, e[0])


def test_quantile_plans_give_the_grid_the_release_must_use():
    tiers = plan_tiers("quantiles", normal_scales([30, 3000]))
    grids = [tiers.tiers[t].n_candidates for t in (0, 1, 2)]
    assert all(np.array_equal(grids[0], gr) for gr in grids)    # nested tiers share it
    mat = tiers.materialize
    assert np.array_equal(grids[0], candidates_for([30, 3000], 1001, "cdf",
                                                   np.where(np.isfinite(mat), mat, 8.0)))


def test_without_a_pilot_the_shape_is_uniform():
    scales = uniform_scales([100, 200], 0, 10)
    assert np.allclose(scales.mean(), 5.0) and np.allclose(scales.variance(), 100 / 12, rtol=1e-2)
    assert "uniform" in scales.source


def test_the_internal_releases_for_the_public_inputs():
    g = np.array(["a", "b", "a", "c"] * 25, dtype=object)
    keys = ["a", "b", "c"]
    hist = cell_counts(g, keys)                                  # (1, groups)
    one = release_group_sizes(hist, keys, rng=np.random.default_rng(3))
    per = release_group_sizes(CellCounts(hist.counts.T), keys, rng=np.random.default_rng(3))
    assert one.value.tolist() == per.value.tolist() and one.epsilon == group_size_epsilon()
    assert one.params["group_keys"] == keys and one.statistic == "count"
    x = np.linspace(20, 100, g.size)
    pilot = release_pilot(cell_counts(x, EDGES, groups=g, group_keys=keys), EDGES, keys,
                          rng=np.random.default_rng(4))
    assert pilot.epsilon == PILOT_EPSILON and np.asarray(pilot.value).shape == (3, 16)
    scales = scales_from_pilot(pilot, EDGES, public_group_sizes(one))
    assert scales.groups == 3 and "pilot" in scales.source


@pytest.mark.parametrize("noise_factor", [0, 1, 2])
def test_a_shown_quantile_group_is_informative(noise_factor):
    """A box is never drawn from a guess: every shown group's expected error is at most
    INFORMATIVE × the error of a release that reads (almost) no data, and within the band."""
    from dp_engine.sound.plan import INFORMATIVE, QUANTILE_EPS_FLOOR, error_curves

    scales = normal_scales([20, 80, 300, 3000])
    plan = plan_groups("quantiles", noise_factor, scales, qs=(0.25, 0.5, 0.75))
    free = error_curves("quantiles", np.full((4, 1), QUANTILE_EPS_FLOOR), scales,
                        qs=(0.25, 0.5, 0.75),
                        n_candidates=plan.n_candidates)[1][:, 0]
    lo, hi = band(noise_factor)
    shown = plan.shown
    assert (plan.expected_relative_error[shown] <= INFORMATIVE * free[shown] * 1.05).all()
    assert (plan.expected_relative_error[shown] >= lo * (1 - 1e-9)).all()
    assert (plan.expected_relative_error[shown] <= hi * (1 + 1e-9)).all()
    assert all(r == WITHHELD_REASON for r, s in zip(plan.reasons, shown, strict=True) if not s)
    if noise_factor == 0:
        assert shown[-1]     # a large group is shown to the owner


# A peaked pooled shape (the sample cohort's Age pilot, 16 cells on 20-100 years): a box plot's
# error first rises with ε and sits near the data-free level around the third party's band.
PEAKED = np.array([0.0138, 0.0046, 0.0046, 0.0276, 0.0, 0.0081, 0.0598, 0.1264, 0.1896,
                   0.2689, 0.1977, 0.0782, 0.0184, 0.0023, 0.0, 0.0])


@pytest.mark.parametrize("sizes", [[599.0, 115.0, 91.0, 39.0, 19.0],
                                   [600.0, 100.0, 125.0, 160.0, 240.0]])
def test_a_box_of_100_patients_or_more_is_shown_to_every_role(sizes):
    edges = np.linspace(20.0, 100.0, PEAKED.size + 1)
    scales = GroupScales(np.asarray(sizes), 20.0, 100.0, edges,
                         np.tile(PEAKED / PEAKED.sum(), (len(sizes), 1)), "pilot")
    tiers = plan_tiers("quantiles", scales)
    for t, plan in tiers.tiers.items():
        big = np.asarray(sizes) >= 100
        assert np.isfinite(plan.epsilon[big]).all(), (t, plan.epsilon, plan.reasons)
        lo, hi = plan.band
        assert (plan.expected_relative_error[big] <= hi).all()
