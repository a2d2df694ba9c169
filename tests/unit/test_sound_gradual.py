"""Gradual release draws each new tier from its exact conditional law (dp_engine/sound/gradual).

Whatever order the tiers of a query are asked in, the stored chain must have the law of the
nested chain: the least noisy tier x + DL(t_a), each noisier one the previous plus the
nesting kernel K(z) = π·[z = 0] + (1 − π)·DL(z; t_b), independent of what came before. These
tests draw tiers out of order (sharpen, bridge) and compare with that law: chi-square
goodness of fit on the central cells at α = 1e-3 (fixed seeds), so a wrong conditional (a
missing piece, a wrong weight) fails while a right one passes.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dp_engine.errors import NotNestableError
from dp_engine.sound import grouped_histogram, grouped_mean, grouped_quantiles
from dp_engine.sound.gradual import between, insert, join, no_noise
from dp_engine.sound.mechanisms import dlap_noise
from dp_engine.sound.tiers import refine_tier, zero_probability

N = 200_000
ALPHA = 1e-3


def _dl(k, t):
    a = np.exp(-1.0 / t)
    return (1 - a) / (1 + a) * a ** np.abs(k)


def _kernel(z, t1, t2):
    pi = zero_probability(t1, t2, True)
    return pi * (np.asarray(z) == 0) + (1 - pi) * _dl(z, t2)


def _fits(sample: np.ndarray, pmf, width: int) -> float:
    """Chi-square p-value of ``sample`` against ``pmf`` on -width..width plus the tails."""
    ks = np.arange(-width, width + 1)
    observed = np.array([(sample == k).sum() for k in ks]
                        + [((sample < -width) | (sample > width)).sum()])
    p = np.array([pmf(k) for k in ks], dtype=float)
    p = np.append(p, max(1.0 - p.sum(), 0.0))
    expected = p * sample.size
    keep = expected > 5
    chi = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    return float(stats.chi2.sf(chi, keep.sum() - 1))


@pytest.mark.parametrize(("t1", "t2", "x"), [(2.0, 5.0, 0.0), (0.7, 3.0, 17.0),
                                             (3.0, 3.5, -4.0), (10.0, 40.0, 1e6)])
def test_sharpening_gives_the_nested_law(t1, t2, x):
    rng = np.random.default_rng(11)
    noisier = x + dlap_noise(np.full(N, t2), (N,), rng)
    better = between(np.full(N, x), noisier, t1, 0.0, t2, zero_probability(t1, t2, True), rng)
    noise, extra = better - x, noisier - better
    assert np.all(better == np.round(better))
    assert _fits(noise, lambda k: _dl(k, t1), int(4 * t1) + 3) > ALPHA
    assert _fits(extra, lambda k: _kernel(k, t1, t2), int(4 * t2) + 3) > ALPHA
    # independence: the kernel's law is the same whatever the new tier's noise
    for part in (noise > 0, noise <= 0):
        assert _fits(extra[part], lambda k: _kernel(k, t1, t2), int(3 * t2) + 2) > ALPHA


@pytest.mark.parametrize(("ta", "t", "tb"), [(1.0, 2.0, 5.0), (0.5, 3.0, 4.0),
                                             (5.0, 9.0, 30.0)])
def test_a_bridged_tier_gives_the_nested_law(ta, t, tb):
    rng = np.random.default_rng(12)
    less = 3.0 + dlap_noise(np.full(N, ta), (N,), rng)
    chain_middle = refine_tier(less, ta, t, discrete=True, rng=rng)
    noisier = refine_tier(chain_middle, t, tb, discrete=True, rng=rng)
    middle = between(less, noisier, t, zero_probability(ta, t, True), tb,
                     zero_probability(t, tb, True), rng)
    assert _fits(middle - less, lambda k: _kernel(k, ta, t), int(4 * t) + 3) > ALPHA
    assert _fits(noisier - middle, lambda k: _kernel(k, t, tb), int(4 * tb) + 3) > ALPHA
    for part in (middle - less > 0, middle - less <= 0):
        assert _fits((noisier - middle)[part], lambda k: _kernel(k, t, tb),
                     int(3 * tb) + 2) > ALPHA


def test_large_lattice_scales_stay_exact():
    """Sums live on lattices with scales of thousands of steps: no overflow, same law."""
    rng = np.random.default_rng(13)
    t1, t2, x = 5_000.0, 20_000.0, 1e7
    noisier = x + dlap_noise(np.full(N, t2), (N,), rng)
    better = between(np.full(N, x), noisier, t1, 0.0, t2, zero_probability(t1, t2, True), rng)
    fresh = dlap_noise(np.full(N, t1), (N,), rng)
    assert np.isfinite(better).all()
    assert stats.ks_2samp(better - x, fresh).pvalue > ALPHA
    assert abs(np.mean(noisier == better) - zero_probability(t1, t2, True)) < 4e-3


def test_a_wrong_conditional_is_caught():
    """The check has power: drawing the better tier afresh, ignoring the noisier one, gives
    the right marginal but not the nested kernel between them."""
    rng = np.random.default_rng(14)
    t1, t2 = 2.0, 5.0
    noisier = dlap_noise(np.full(N, t2), (N,), rng)
    independent = dlap_noise(np.full(N, t1), (N,), rng)
    assert _fits(noisier - independent, lambda k: _kernel(k, t1, t2), 23) < ALPHA


def _releases(kind: str, eps: list[float], gen):
    values = np.array([21.0, 35.5, 40.0, 52.0, 60.0, 77.0, 80.0, 95.0])
    groups = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    if kind == "histogram":
        return grouped_histogram(values, groups, np.linspace(20, 100, 5), [0, 1], eps, rng=gen)
    if kind == "mean":
        return grouped_mean(values, groups, [0, 1], 20.0, 100.0, eps, rng=gen)
    return grouped_quantiles(values, groups, [0, 1], 20.0, 100.0, eps,
                             qs=(0.25, 0.5, 0.75), rng=gen)


@pytest.mark.parametrize("kind", ["histogram", "mean", "quantiles"])
def test_tiers_asked_out_of_order_have_the_fresh_law(kind):
    """Third party first (fresh), then the owner (sharpened), then a collaborator (bridged):
    each tier's noise has the law of a fresh release at its ε, and they nest."""
    rng = np.random.default_rng(15)
    eps = {0: [2.0, 1.5], 1: [1.0, 0.8], 2: [0.4, 0.3]}
    base = {t: _releases(kind, e, no_noise()) for t, e in eps.items()}
    truth = base[0].noisy
    draws = {t: [] for t in eps}
    for _ in range(1500):
        t2 = _releases(kind, eps[2], rng)
        t0 = insert(base[0], more=t2, truth=truth, rng=rng)
        t1 = insert(base[1], less=t0, more=t2, rng=rng)
        for t, rel in ((0, t0), (1, t1), (2, t2)):
            draws[t].append({n: np.asarray(v, dtype=float) for n, v in rel.noisy.items()})
    for name in truth:
        step = float(base[0].params["grid"][name])
        for t in eps:
            noise = (np.stack([d[name] for d in draws[t]]) - np.asarray(truth[name])) / step
            scale = np.asarray(base[t].scales[name], dtype=float).reshape(2, -1)[:, :1] / step
            rows = noise.reshape(noise.shape[0], 2, -1)
            for g in range(2):
                mean_abs = np.abs(rows[:, g]).mean()
                a = np.exp(-1.0 / scale[g, 0])
                want = 2 * a / (1 - a * a)
                assert abs(mean_abs - want) < 0.08 * want + 0.05, (name, t, g)


def test_refused_when_the_chain_would_break():
    rng = np.random.default_rng(16)
    less = _releases("histogram", [1.0, 1.0], rng)
    template = _releases("histogram", [2.0, 2.0], no_noise())
    with pytest.raises(NotNestableError):          # the "less noisy" tier is noisier
        insert(template, less=less, rng=rng)
    noisier = _releases("histogram", [0.5, 0.5], rng)
    with pytest.raises(NotNestableError):          # sharpening needs the truth
        insert(template, more=noisier, rng=rng)


@pytest.mark.parametrize("kind", ["histogram", "mean", "quantiles"])
def test_a_tier_that_shows_nothing_joins_a_chain_that_shows_nothing(kind):
    """The owner's tier withheld every group (too few patients); a partner's tier of the same
    view, withholding every group too, is an empty release, not an error; one that would
    show a group still needs the data."""
    rng = np.random.default_rng(17)
    nothing = _releases(kind, [np.nan, np.nan], rng)
    assert np.all(nothing.withheld)
    empty = join({0: nothing}, 2, [0.0, np.nan], rng=rng)
    assert np.all(empty.withheld) and empty.epsilon == 0.0
    assert all(np.isnan(np.asarray(v, dtype=float)).all() for v in empty.noisy.values())
    with pytest.raises(NotNestableError):
        join({0: nothing}, 2, [0.5, 0.0], rng=rng)
