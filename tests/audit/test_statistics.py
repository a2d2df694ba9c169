"""Privacy audits of the sound-mode statistics (dp_engine.sound.statistics and tiers).

Neighbours add or remove one record. Each audit runs a statistic many times on a
small worst-case pair D, D' = D + one record (small n makes one record weigh most;
extreme values at the public bounds move sums and quantiles furthest) and asks the
empirical auditor for a lower bound on ε; the statistic must not be flagged at its
claimed ε. A correct statistic is flagged with probability ≤ α = 1e-5 per test.

Runs are vectorized through the engine's own grouped path: the grouped statistics
noise every public group independently with the same code as the ungrouped ones, so
one grouped call over n replica groups, each holding a copy of D, gives n independent
releases on D. Each ungrouped function is also audited directly with a short loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

from dp_engine.audit import AuditResult, audit_scalar, audit_vector, looped
from dp_engine.sound import (
    count,
    grouped_histogram,
    grouped_mean,
    grouped_quantiles,
    grouped_variance,
    histogram,
    mean,
    quantiles,
    refine,
    variance,
)

ALPHA = 1e-5
RUNS = 100_000
LOOP_RUNS = 4_000  # direct (one call per run) cross-checks of the replicated audits


def assert_sound(result: AuditResult) -> None:
    """No violation at the claimed ε; the result line is printed for the docs table (-s)."""
    print(f"AUDIT {os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]} {result.summary()}")
    assert not result.violated, f"privacy violation: {result.summary()}"


def audit(sample_d, sample_d_prime, eps: float, seed: int, *, vector=False, **kwargs):
    kwargs.setdefault("n_runs", RUNS)
    run = audit_vector if vector else audit_scalar
    return run(
        sample_d, sample_d_prime, eps, alpha=ALPHA, rng=np.random.default_rng(seed), **kwargs
    )


def replicas(release: Callable, data) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Sampler: ``release(values, groups, keys, rng)`` over n replica groups holding ``data``.

    ``data`` is a list of (group offset, value): offset g puts the value in the g-th of the
    replica's groups, so a replica can span several public groups.
    """
    offsets = np.array([g for g, _ in data], dtype=np.int64)
    values = np.array([v for _, v in data], dtype=float)
    width = int(offsets.max()) + 1 if offsets.size else 1

    def sample(rng: np.random.Generator, n: int) -> np.ndarray:
        groups = (np.arange(n)[:, None] * width + offsets[None, :]).ravel()
        keys = np.arange(n * width)
        out = np.asarray(release(np.tile(values, n), groups, keys, rng).value, dtype=float)
        return out.reshape(n, -1)

    return sample


def one_group(values) -> list[tuple[int, float]]:
    return [(0, float(v)) for v in values]


# --- counts and histograms -------------------------------------------------------------


@pytest.mark.parametrize(("d", "eps"), [([2.0], 1.0), ([2.0, 3.0, 4.0], 0.5)])
def test_count(d, eps):
    def sampler(values):
        return looped(lambda rng: count(np.array(values), eps, rng=rng).value)

    result = audit(sampler(d), sampler([*d, 9.0]), eps, seed=201, n_runs=20_000)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.5 * eps


def test_count_of_an_empty_selection_is_released_like_any_other():
    """0 vs 1 matching patients: refusing the empty case would itself reveal it."""
    eps = 1.0

    def sampler(values):
        return looped(lambda rng: count(np.array(values, dtype=float), eps, rng=rng).value)

    assert_sound(audit(sampler([]), sampler([5.0]), eps, seed=202, n_runs=LOOP_RUNS))


EDGES = np.array([0.0, 1.0, 2.0, 3.0])


@pytest.mark.parametrize("added", [2.5, 99.0])  # an empty cell; a value clamped to the edge
def test_histogram_replicated(added):
    eps, d = 1.0, [0.2, 0.7, 1.5]

    def sampler(values):
        return replicas(
            lambda v, g, k, rng: grouped_histogram(v, g, EDGES, k, eps, rng=rng), one_group(values)
        )

    result = audit(sampler(d), sampler([*d, added]), eps, seed=203, vector=True)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.5 * eps


def test_histogram_direct():
    eps, d = 1.0, [0.2, 0.7, 1.5]

    def sampler(values):
        return looped(lambda rng: histogram(np.array(values), EDGES, eps, rng=rng).value)

    assert_sound(
        audit(sampler(d), sampler([*d, 2.5]), eps, seed=204, vector=True, n_runs=LOOP_RUNS)
    )


EPS = 1.0
GROUPED = {
    "histogram": lambda v, g, k, rng: grouped_histogram(v, g, EDGES, k, EPS, rng=rng),
    "mean": lambda v, g, k, rng: grouped_mean(v, g, k, 0.0, 3.0, EPS, rng=rng),
    "variance": lambda v, g, k, rng: grouped_variance(v, g, k, 0.0, 3.0, EPS, rng=rng),
    "quantiles": lambda v, g, k, rng: grouped_quantiles(
        v, g, k, 0.0, 3.0, EPS, qs=(0.5,), n_candidates=7, rng=rng
    ),
}


@pytest.mark.parametrize("name", list(GROUPED))
def test_statistic_of_an_empty_selection(name):
    """D is empty, D' holds one record at the upper bound: the answer must not tell them apart."""

    def sampler(data):
        return replicas(GROUPED[name], data)

    result = audit(sampler([]), sampler([(0, 3.0)]), EPS, seed=212, vector=True)
    assert_sound(result)


@pytest.mark.parametrize("name", list(GROUPED))
def test_grouped_statistic_spends_epsilon_once_across_groups(name):
    """Parallel composition: a record lands in one group, so the joint release is ε-DP."""
    d = [(0, 0.5), (0, 1.5), (1, 0.5)]

    def sampler(data):
        return replicas(GROUPED[name], data)

    result = audit(sampler(d), sampler([*d, (1, 2.5)]), EPS, seed=205, vector=True)
    assert_sound(result)


# --- mean and variance -----------------------------------------------------------------

MOMENT_PAIRS = [
    ([0.0], 1.0, 0.0, 1.0),  # n = 1 at the lower bound, add the upper bound
    ([1.0, 1.0, 1.0], 0.0, 0.0, 1.0),
    ([20.0], -5.0, -5.0, 20.0),
]


@pytest.mark.parametrize(("d", "added", "lower", "upper"), MOMENT_PAIRS)
@pytest.mark.parametrize("statistic", [grouped_mean, grouped_variance])
def test_moments_replicated(statistic, d, added, lower, upper):
    eps = 1.0

    def sampler(values):
        return replicas(
            lambda v, g, k, rng: statistic(v, g, k, lower, upper, eps, rng=rng), one_group(values)
        )

    assert_sound(audit(sampler(d), sampler([*d, added]), eps, seed=206))


@pytest.mark.parametrize("statistic", [mean, variance])
def test_moments_direct(statistic):
    eps, d = 1.0, [0.0]

    def sampler(values):
        return looped(lambda rng: statistic(np.array(values), 0.0, 1.0, eps, rng=rng).value)

    assert_sound(audit(sampler(d), sampler([*d, 1.0]), eps, seed=207, n_runs=LOOP_RUNS))


# --- quantiles -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qs", "d", "added", "power", "method"),
    [
        ((0.5,), [0.0], 1.0, 0.5, "independent"),  # all of ε on one level: the sharpest test
        ((0.25, 0.5, 0.75), [0.5, 0.5, 0.5], 0.0, 0.0, "independent"),  # ε/3 per level
        # the default noisy CDF: its released quantiles are coarse post-processing of the
        # tree, so the power check is on the tree itself (tests/audit/test_groups.py)
        ((0.5,), [0.0], 1.0, 0.0, "cdf"),
        ((0.25, 0.5, 0.75), [0.5, 0.5, 0.5], 0.0, 0.0, "cdf"),
    ],
)
def test_quantiles_replicated(qs, d, added, power, method):
    eps = 1.0

    def release(v, g, k, rng):
        return grouped_quantiles(v, g, k, 0.0, 1.0, eps, qs=qs, n_candidates=11, method=method,
                                 rng=rng)

    def sampler(values):
        return replicas(release, one_group(values))

    result = audit(sampler(d), sampler([*d, added]), eps, seed=208, vector=True, n_runs=50_000)
    assert_sound(result)
    assert result.epsilon_lower_bound >= power


def test_quantiles_direct():
    eps, d = 1.0, [0.0]

    def sampler(values):
        return looped(
            lambda rng: (
                quantiles(
                    np.array(values), 0.0, 1.0, eps, qs=(0.5,), n_candidates=11, rng=rng
                ).value
            )
        )

    result = audit(sampler(d), sampler([*d, 1.0]), eps, seed=209, vector=True, n_runs=3_000)
    assert_sound(result)


# --- nested tiers ----------------------------------------------------------------------


def test_refined_mean_is_private_at_the_lower_epsilon():
    """A release at ε = 2 refined to ε = 0.5 must be 0.5-DP (fresh-release law)."""
    high, low = 2.0, 0.5

    def sampler(values):
        def release(v, g, k, rng):
            return refine(grouped_mean(v, g, k, 0.0, 1.0, high, rng=rng), low, rng=rng)

        return replicas(release, one_group(values))

    assert_sound(audit(sampler([0.0]), sampler([0.0, 1.0]), low, seed=210))


def test_refined_count_is_private_at_the_lower_epsilon():
    high, low = 3.0, 1.0

    def sampler(values):
        return looped(
            lambda rng: refine(count(np.array(values), high, rng=rng), low, rng=rng).value
        )

    result = audit(sampler([2.0]), sampler([2.0, 7.0]), low, seed=211, n_runs=10_000)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.5 * low
