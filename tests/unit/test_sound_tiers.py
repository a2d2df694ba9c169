"""Nested tiers: refined answers have exactly the target law, and refinement composes.

Each distribution test rejects at ALPHA = 1e-4 with a fixed seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dp_engine.errors import InvalidEpsilonError, NotNestableError
from dp_engine.sound import (
    Release,
    grouped_histogram,
    grouped_mean,
    mean,
    quantiles,
    refine,
    refine_tier,
    variance,
)
from dp_engine.sound.accuracy import dlap_abs_mean
from dp_engine.sound.mechanisms import dlap_noise
from dp_engine.sound.tiers import zero_probability
from tests.unit.test_sound_mechanisms import chi2_pvalue, dlap_pmf

ALPHA = 1e-4
N = 200_000


def test_zero_probability_matches_the_design_formulas():
    assert zero_probability(1.0, 2.0, discrete=False) == pytest.approx(0.25)
    for t1, t2 in [(0.5, 1.0), (1.0, 4.0), (3.0, 3.5)]:
        p, q = math.exp(-1 / t1), math.exp(-1 / t2)
        direct = p * (1 - q) ** 2 / (q * (1 - p) ** 2)
        assert zero_probability(t1, t2, discrete=True) == pytest.approx(direct, rel=1e-12)
        assert 0 < direct < 1
    assert zero_probability(2.0, 2.0, discrete=True) == pytest.approx(1.0)


@pytest.mark.parametrize(("b1", "b2"), [(1.0, 1.5), (0.5, 4.0)])
def test_laplace_refinement_has_the_target_law(b1, b2):
    gen = np.random.default_rng(20)
    x = 3.0 + gen.laplace(0, b1, N)
    y = refine_tier(x, b1, b2, rng=gen)
    assert stats.kstest(y, stats.laplace(loc=3.0, scale=b2).cdf).pvalue > ALPHA


@pytest.mark.parametrize(("t1", "t2"), [(0.5, 1.0), (2.0, 2.5), (1.0, 6.0)])
def test_discrete_refinement_has_the_target_law(t1, t2):
    gen = np.random.default_rng(21)
    x = dlap_noise(t1, N, gen).astype(np.int64)
    y = refine_tier(x, t1, t2, discrete=True, rng=gen)
    assert y.dtype == np.int64
    support = np.arange(-300, 301)
    assert chi2_pvalue(y, support, dlap_pmf(t2, support)) > ALPHA


def test_refinement_composes():
    gen = np.random.default_rng(22)
    x = dlap_noise(1.0, N, gen)
    twice = refine_tier(
        refine_tier(x, 1.0, 2.0, discrete=True, rng=gen), 2.0, 5.0, discrete=True, rng=gen
    )
    support = np.arange(-300, 301)
    assert chi2_pvalue(twice, support, dlap_pmf(5.0, support)) > ALPHA
    c = gen.laplace(0, 1.0, N)
    c2 = refine_tier(refine_tier(c, 1.0, 2.0, rng=gen), 2.0, 5.0, rng=gen)
    assert stats.kstest(c2, stats.laplace(scale=5.0).cdf).pvalue > ALPHA


def test_refine_tier_keeps_scalars_and_refuses_less_noise():
    assert isinstance(refine_tier(1.0, 1.0, 2.0, rng=np.random.default_rng(0)), float)
    with pytest.raises(NotNestableError, match="noisier"):
        refine_tier(np.zeros(3), 2.0, 1.0)


def empty_histogram(eps: float, seed: int):
    """5000 groups with no record (plus one): 20 000 cells whose raw value is pure noise."""
    return grouped_histogram(
        np.array([0.5]),
        np.array([0]),
        np.arange(5.0),
        list(range(5000)),
        eps,
        rng=np.random.default_rng(seed),
    )


def raw_noise(release: Release) -> np.ndarray:
    raw = np.asarray(release.noisy["count"]).ravel().copy()
    raw[0] -= 1
    return raw


def test_refined_histogram_has_the_law_of_a_fresh_release():
    base = empty_histogram(1.0, 23)
    low = refine(base, 0.25, rng=np.random.default_rng(24))
    assert low.epsilon == 0.25 and low.scales["count"] == pytest.approx(4.0)
    assert low.value.dtype == np.int64 and (low.value >= 0).all()
    assert low.expected_error.ravel()[0] == pytest.approx(dlap_abs_mean(4.0))
    support = np.arange(-200, 201)
    assert chi2_pvalue(raw_noise(low), support, dlap_pmf(4.0, support)) > ALPHA
    # owner → collaborator → third party equals owner → third party in law
    mid = refine(base, 0.5, rng=np.random.default_rng(25))
    third = refine(mid, 0.25, rng=np.random.default_rng(26))
    assert chi2_pvalue(raw_noise(third), support, dlap_pmf(4.0, support)) > ALPHA
    # and it is post-processing of the tier above: where no noise was added, cells agree
    same = raw_noise(third) == raw_noise(mid)
    assert 0.2 < same.mean() < 1.0


def test_refined_mean_sum_noise_has_the_fresh_scale():
    """All values at the midpoint: centred sums are exactly 0, so the noisy sum is the noise."""
    g, eps = 20_000, 1.0
    groups = np.repeat(np.arange(g), 3)
    base = grouped_mean(
        np.full(3 * g, 5.0), groups, list(range(g)), 0.0, 10.0, eps, rng=np.random.default_rng(27)
    )
    low = refine(base, 0.2, rng=np.random.default_rng(28))
    assert low.scales["sum"] == pytest.approx(base.scales["sum"] * 5)
    fresh = grouped_mean(
        np.full(3 * g, 5.0), groups, list(range(g)), 0.0, 10.0, 0.2, rng=np.random.default_rng(29)
    )
    assert fresh.scales == pytest.approx(low.scales)
    # a lattice of 2^-20 under a scale of ~50: the Laplace CDF is exact to ~1e-8
    assert stats.kstest(low.noisy["sum"], stats.laplace(scale=low.scales["sum"]).cdf).pvalue > ALPHA
    support = np.arange(-400, 401)
    count_noise = low.noisy["count"] - 3
    assert chi2_pvalue(count_noise, support, dlap_pmf(low.scales["count"], support)) > ALPHA
    assert ((low.value >= 0) & (low.value <= 10)).all()
    assert low.params["epsilon_split"] == pytest.approx({"count": 0.1, "sum": 0.1})


def test_refine_survives_the_ledger_round_trip():
    x = np.random.default_rng(30).uniform(0, 10, 500)
    for rel in (mean(x, 0, 10, 1.0), variance(x, 0, 10, 1.0)):
        back = Release.from_dict(rel.to_dict())
        low = refine(back, 0.3, rng=np.random.default_rng(31))
        assert low.epsilon == 0.3 and low.statistic == rel.statistic
        assert isinstance(low.value, float)
        assert low.expected_error > rel.expected_error * 0.9


def test_refine_refusals():
    x = np.arange(10.0)
    with pytest.raises(NotNestableError, match="afresh"):
        refine(quantiles(x, 0, 10, 1.0, method="independent"), 0.5)
    with pytest.raises(NotNestableError, match="afresh"):
        refine(quantiles(x, 0, 10, 1.0, method="joint"), 0.5)
    rel = mean(x, 0, 10, 1.0)
    with pytest.raises(InvalidEpsilonError, match="smaller ε"):
        refine(rel, 1.0)
    with pytest.raises(InvalidEpsilonError, match="smaller ε"):
        refine(rel, 2.0)
    with pytest.raises(InvalidEpsilonError):
        refine(rel, -1.0)
