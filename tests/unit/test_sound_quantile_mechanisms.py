"""The quantile mechanisms: exact laws, the consistent tree, and the CDF intervals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dp_engine.sound import quantile_mechanisms as qm
from tests.unit.test_sound_mechanisms import chi2_pvalue

ALPHA = 1e-4


def test_joint_exponential_mechanism_has_the_joint_law():
    """5 candidates, 2 levels: every sorted pair drawn ∝ exp(ε·u/(2·2k)), u the JointExp
    utility; 30 000 groups in one call against the enumerated law."""
    counts = np.array([[0, 1, 3, 0, 2, 1]])                 # c = 5 candidates (+ cell 0)
    qs, eps, k = (0.3, 0.7), 1.5, 1
    g = 30_000
    got = qm.joint(np.repeat(counts, g, axis=0), np.full(g, eps), qs, k,
                   np.random.default_rng(20))
    below = np.cumsum(counts[0])                              # below[o] = #{x < cand_o}
    n = below[-1]
    pairs = [p for p in itertools.product(range(5), repeat=2) if p[0] <= p[1]]
    gaps = np.diff([0.0, *qs, 1.0])
    logits = []
    for a, b in pairs:
        u = -(abs(below[a] - gaps[0] * n) + abs(below[b] - below[a] - gaps[1] * n)
              + abs(n - below[b] - gaps[2] * n))
        logits.append(eps * u / (2 * 2 * k))
    probs = np.exp(np.array(logits) - max(logits))
    index = {p: i for i, p in enumerate(pairs)}
    drawn = np.array([index[(a, b)] for a, b in got])
    assert chi2_pvalue(drawn, np.arange(len(pairs)), probs) > ALPHA


@pytest.mark.parametrize("b", [2, 4, 8])
def test_consistent_tree_is_exact_without_noise_and_sums_to_its_parents(b):
    rng = np.random.default_rng(21)
    cells = 37
    shape = qm.TreeShape(cells, b)
    leaves = np.zeros((3, shape.leaves))
    leaves[:, :cells] = rng.integers(0, 9, (3, cells))
    levels = qm._levels_from_leaves(leaves, b, shape.depth)
    assert np.allclose(qm.consistent_leaves(levels, b), leaves)
    noisy = [lv + rng.normal(0, 3, lv.shape) for lv in levels]
    est = qm.consistent_leaves(noisy, b)
    # consistency: the estimates of every level are the sums of the level below
    assert np.allclose(est.sum(axis=1), qm._levels_from_leaves(est, b, shape.depth)[0][:, 0])
    # least squares beats the raw leaves on average
    err_raw = np.mean((noisy[-1] - leaves) ** 2)
    assert np.mean((est - leaves) ** 2) < err_raw


def test_cdf_noise_quantiles_match_simulation():
    """The Cornish–Fisher quantile of D_o = E(o) − q·E_N against 20 000 noise-only trees."""
    cells, eps, q = 42, 0.5, 0.3
    g = 20_000
    cdf = qm.noisy_cdf(np.zeros((g, cells)), np.full(g, eps), 1, np.random.default_rng(22))
    d = cdf.prefix - q * cdf.total[:, None]
    t = float(cdf.scale[0])
    h = qm.noise_quantile(cells, cdf.shape.branching, t, q, 0.975)
    empirical = np.quantile(d, 0.975, axis=0)
    assert np.allclose(h, empirical, rtol=0.08, atol=0.5)


def test_true_indices_and_inversion_without_noise():
    counts = np.array([[0, 2, 0, 3, 5, 0]])                   # 10 values on 5 candidates
    assert qm.true_indices(counts, (0.1, 0.2, 0.5, 1.0)).tolist() == [[0, 0, 2, 3]]
    cdf = qm.noisy_cdf(counts, np.array([1e9]), 1, np.random.default_rng(0))
    assert qm.invert(cdf, (0.1, 0.5)).tolist() == [[0.0, 2.0]]
    lo, hi = qm.cdf_intervals(cdf, (0.5,))
    assert lo[0, 0] <= 2 <= hi[0, 0]
    assert qm.true_indices(np.zeros((1, 6), dtype=int), (0.5,)).tolist() == [[-1]]


def test_default_branching_and_tree_shape():
    for cells in (12, 102, 1002):
        b = qm.default_branching(cells)
        shape = qm.TreeShape(cells, b)
        assert shape.leaves >= cells and shape.levels == shape.depth + 1
        assert b in (2, 4, 8, 16, 32)
    assert math.isclose(qm.TreeShape(16, 4).depth, 2)


@pytest.mark.parametrize("cells", [12, 127, 1002])
def test_rank_noise_variance_is_prefix_moments_at_those_points(cells):
    """The shortcut the grid choice uses equals the full matrix's sums (to rounding)."""
    b = qm.default_branching(cells)
    qs = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    pos = np.clip(np.rint(qs * (cells - 2)).astype(int), 0, cells - 2)
    mom = qm.prefix_moments(cells, b)
    full = qs**2 * mom[0][pos] - 2 * qs * mom[1][pos] + mom[2][pos]
    assert np.allclose(qm.rank_noise_variance(cells, b, pos, qs), full, rtol=1e-9, atol=1e-12)
