"""Releases from aggregates (issue 14 item 2), per-group ε, true values and the per-patient
contribution bound (issue 13 item 3)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_engine.errors import DataTypeError, InvalidEpsilonError, NotNestableError
from dp_engine.sound import (
    CandidateCounts,
    CellCounts,
    MomentSums,
    Release,
    bound_contributions,
    candidate_counts,
    cell_counts,
    coarsen,
    grouped_histogram,
    grouped_mean,
    grouped_quantiles,
    grouped_variance,
    moment_sums,
    realized_relative_error,
    refine,
    release_counts,
    release_moments,
    release_quantiles,
    true_counts,
    true_means,
    true_quantiles,
    true_variances,
)
from dp_engine.sound.quantile_mechanisms import TreeShape
from tests.unit.test_sound_mechanisms import chi2_pvalue, dlap_pmf

ALPHA = 1e-4
KEYS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    x = np.clip(rng.normal(60, 20, 3000), -10, 130)
    x[rng.random(3000) < 0.05] = np.nan
    g = rng.choice(["a", "b", "c", None], 3000, p=[0.6, 0.3, 0.08, 0.02])
    return x, g


def same(a: Release, b: Release) -> bool:
    return json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


def test_row_functions_are_reference_aggregates_plus_the_release(data):
    """One implementation: same seed, same answer from rows or from the aggregates."""
    x, g = data
    edges = np.arange(0.0, 121.0, 10.0)
    rows = grouped_histogram(x, g, edges, KEYS, 0.7, rng=np.random.default_rng(1))
    agg = release_counts(cell_counts(x, edges, groups=g, group_keys=KEYS), 0.7,
                         rng=np.random.default_rng(1), bins=edges, group_keys=KEYS)
    assert same(rows, agg)
    for fn, squares in ((grouped_mean, False), (grouped_variance, True)):
        rows = fn(x, g, KEYS, 0, 120, 0.7, rng=np.random.default_rng(2))
        s = moment_sums(x, 0, 120, squares=squares, groups=g, group_keys=KEYS)
        assert same(rows, release_moments(s, 0.7, rng=np.random.default_rng(2), group_keys=KEYS))
    rows = grouped_quantiles(x, g, KEYS, 0, 120, 0.7, rng=np.random.default_rng(3))
    c = candidate_counts(x, 0, 120, 1001, groups=g, group_keys=KEYS)
    assert same(rows, release_quantiles(c, 0.7, rng=np.random.default_rng(3), group_keys=KEYS))


def test_true_values_from_the_aggregates(data):
    x, g = data
    keep = ~np.isnan(x) & pd.Series(g).isin(KEYS).to_numpy()
    s = moment_sums(x, 0, 120, squares=True, groups=g, group_keys=KEYS)
    for i, k in enumerate(KEYS):
        v = np.clip(x[keep & (g == k)], 0, 120)
        assert true_means(s)[i] == pytest.approx(v.mean(), abs=1e-5)
        assert true_variances(s)[i] == pytest.approx(v.var(), rel=1e-6)
        c = candidate_counts(x, 0, 120, 1001, groups=g, group_keys=KEYS)
        # the grid quantile: the smallest candidate with ≥ q·n values snapped at or below it
        snapped = np.floor(v / 0.12 + 1e-9) * 0.12
        want = np.quantile(snapped, [0.1, 0.5, 0.9], method="inverted_cdf")
        assert true_quantiles(c, (0.1, 0.5, 0.9))[i] == pytest.approx(want, abs=1e-6)
    edges = np.array([0.0, 50.0, 120.0])
    assert true_counts(cell_counts(x, edges)).tolist() == [
        np.histogram(np.clip(x[~np.isnan(x)], 0, 120), edges)[0].tolist()]
    empty = moment_sums(np.array([]), 0, 1, squares=True)
    assert np.isnan(true_means(empty)).all() and np.isnan(true_variances(empty)).all()


def test_per_group_epsilon_sets_each_group_scale_and_the_view_costs_the_maximum():
    counts = CellCounts(np.zeros((6000, 1), dtype=np.int64))
    eps = np.tile([0.5, 2.0, np.nan], 2000)
    rel = release_counts(counts, eps, rng=np.random.default_rng(4), statistic="count",
                         group_keys=list(range(6000)))
    assert rel.epsilon == 2.0 and rel.params["epsilon_by_group"][:3] == [0.5, 2.0, None]
    assert rel.withheld.tolist()[:3] == [False, False, True]
    raw = np.asarray(rel.noisy["count"]).reshape(2000, 3)
    assert np.isnan(raw[:, 2]).all() and np.isnan(np.asarray(rel.value, float)[2::3]).all()
    support = np.arange(-60, 61)
    for col, e in ((0, 0.5), (1, 2.0)):
        assert chi2_pvalue(raw[:, col], support, dlap_pmf(1 / e, support)) > ALPHA
    back = Release.from_dict(json.loads(json.dumps(rel.to_dict())))
    assert back.withheld.tolist() == rel.withheld.tolist()
    assert np.allclose(back.scales["count"], rel.scales["count"], equal_nan=True)


def test_bad_per_group_epsilons_are_refused():
    cells = CellCounts(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(DataTypeError, match="one ε per group"):
        release_counts(cells, [1.0, 1.0, 1.0], group_keys=[0, 1])
    with pytest.raises(InvalidEpsilonError):
        release_counts(cells, [1.0, -1.0], group_keys=[0, 1])
    with pytest.raises(DataTypeError, match="group keys"):
        release_counts(cells, 1.0, group_keys=[0])


def test_refine_per_group_keeps_the_fresh_law_and_can_withhold():
    g = 4000
    s = MomentSums(0.0, 10.0, np.full(g, 5.0), np.zeros(g))
    base = release_moments(s, np.tile([2.0, 1.0], g // 2), rng=np.random.default_rng(5),
                           group_keys=list(range(g)))
    low = refine(base, np.tile([0.5, np.nan], g // 2), rng=np.random.default_rng(6))
    assert low.epsilon == 0.5 and low.withheld[1::2].all() and not low.withheld[::2].any()
    fresh = release_moments(s, np.tile([0.5, np.nan], g // 2), rng=np.random.default_rng(7),
                            group_keys=list(range(g)))
    assert np.allclose(low.scales["sum"], fresh.scales["sum"], equal_nan=True)
    noise = np.asarray(low.noisy["sum"])[::2]
    assert stats.kstest(noise, stats.laplace(scale=fresh.scales["sum"][0]).cdf).pvalue > ALPHA
    with pytest.raises(NotNestableError, match="withheld"):
        refine(low, np.tile([0.5, 0.5], g // 2))
    with pytest.raises(InvalidEpsilonError, match="per group"):
        refine(base, np.tile([3.0, 0.5], g // 2))


def test_quantile_cdf_releases_nest_and_keep_their_grids():
    x = np.random.default_rng(8).normal(50, 10, 3000)
    g = np.repeat(["small", "big"], [200, 2800])
    c = candidate_counts(x, 0, 100, 1001, groups=g, group_keys=["small", "big"])
    rel = release_quantiles(c, [2.0, 1.0], qs=(0.1, 0.5, 0.9), group_keys=["small", "big"],
                            n_estimate=[200, 2800], rng=np.random.default_rng(9))
    grids = rel.params["n_candidates"]
    assert isinstance(grids, list) and grids[0] < grids[1]        # one grid per group
    low = refine(rel, [1.0, 0.2], rng=np.random.default_rng(10))
    assert low.params["n_candidates"] == grids and low.epsilon == 1.0
    assert (np.diff(low.value, axis=1) >= 0).all()
    assert (low.ci_low <= low.value).all() and (low.value <= low.ci_high).all()
    wide = (low.ci_high - low.ci_low) > (rel.ci_high - rel.ci_low) - 1e-9
    assert wide.mean() > 0.5                                      # noisier: wider intervals
    back = Release.from_dict(json.loads(json.dumps(rel.to_dict())))   # the ledger round trip
    assert same(back, rel)
    again = refine(back, [1.0, 0.2], rng=np.random.default_rng(10))
    assert np.allclose(again.value, low.value)


def test_coarsening_is_exact():
    x = np.random.default_rng(11).uniform(-5, 105, 5000)
    fine = candidate_counts(x, 0, 100, 1001)
    for c in (11, 101, 251):
        assert np.array_equal(coarsen(fine, c).counts, candidate_counts(x, 0, 100, c).counts)
    with pytest.raises(DataTypeError, match="coarsened"):
        coarsen(fine, 7)


def test_realized_error_uses_the_one_definition():
    rel = release_counts(CellCounts(np.array([[10, 0, 30]])), 1e6, bins=np.arange(4.0),
                         rng=np.random.default_rng(12))
    assert realized_relative_error(rel, np.array([[12.0, 0.0, 28.0]]))[0] == pytest.approx(10.0)


# --- the unit of privacy ------------------------------------------------------------------


def test_at_most_k_rows_per_patient_chosen_from_the_patients_own_rows():
    rng = np.random.default_rng(13)
    ids = rng.choice([f"p{i}" for i in range(300)], 2000).astype(object)
    ids[:7] = None
    kept = bound_contributions(ids, 2, seed=5)
    per = pd.Series(ids[kept]).value_counts()
    assert per.max() <= 2 and not kept[:7].any()
    assert (per == 2).sum() > 0.8 * per.size              # patients with ≥ 2 rows keep 2
    assert np.array_equal(kept, bound_contributions(ids, 2, seed=5))   # reproducible
    # adding another patient's rows anywhere never changes which rows of the others are kept
    more = np.insert(ids, [10, 500, 1500], "new").astype(object)
    kept_more = bound_contributions(more, 2, seed=5)
    assert np.array_equal(np.delete(kept_more, [10, 501, 1502]), kept)
    assert not np.array_equal(kept, bound_contributions(ids, 2, seed=6))


def test_bounded_aggregates_carry_k_and_the_releases_scale_with_it():
    values = np.arange(10.0)
    ids = np.array(["a"] * 6 + ["b"] * 4, dtype=object)
    cells = cell_counts(values, np.array([0.0, 5.0, 10.0]), patients=ids, max_rows_per_patient=3)
    assert cells.contribution == 3 and cells.counts.sum() == 6
    rel = release_counts(cells, 1.0, rng=np.random.default_rng(14))
    assert rel.scales["count"] == pytest.approx(3.0) and rel.sensitivity == 3.0
    s = moment_sums(values, 0, 10, squares=False, patients=ids, max_rows_per_patient=3)
    m = release_moments(s, 1.0, rng=np.random.default_rng(15))
    one = release_moments(moment_sums(values, 0, 10, squares=False), 1.0,
                          rng=np.random.default_rng(15))
    assert m.scales["sum"] == pytest.approx(3 * one.scales["sum"])
    q = release_quantiles(candidate_counts(values, 0, 10, 11, patients=ids,
                                           max_rows_per_patient=3), 1.0,
                          rng=np.random.default_rng(16))
    (tree_sensitivity,) = q.sensitivity.values()
    levels = TreeShape(12, q.params["branching"]["11"]).levels
    assert tree_sensitivity == 3 * levels and q.scales["tree11"] == pytest.approx(3 * levels)
    with pytest.raises(DataTypeError, match="both"):
        cell_counts(values, np.array([0.0, 10.0]), patients=ids)
    with pytest.raises(DataTypeError, match="whole number"):
        cell_counts(values, np.array([0.0, 10.0]), patients=ids, max_rows_per_patient=0)


def test_candidate_counts_on_patients_equal_counts_of_the_kept_rows():
    values = np.linspace(0, 10, 40)
    ids = np.repeat(np.arange(8), 5).astype(object)
    kept = bound_contributions(ids, 2, seed=1)
    direct = candidate_counts(values[kept], 0, 10, 21).counts
    bounded = candidate_counts(values, 0, 10, 21, patients=ids, max_rows_per_patient=2,
                               bound_seed=1)
    assert np.array_equal(direct, bounded.counts) and bounded.contribution == 2
    assert CandidateCounts(0, 10, 21, direct).contribution == 1
