"""Privacy audits of the sound-mode noise mechanisms (dp_engine.sound.mechanisms).

Each test runs a mechanism on a worst-case pair of neighbouring inputs (values one
sensitivity apart, at the edges of the bounds where truncation matters) and asks the
empirical auditor for a lower bound on ε. A mechanism that keeps its promise is flagged
with probability ≤ α = 1e-5 per test (Clopper–Pearson, Bonferroni over the two bounds),
so a failure here is a real privacy bug, not noise. Seeds are fixed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from dp_engine.audit import AuditResult, audit_scalar, audit_vector, looped
from dp_engine.sound import (
    bounded_laplace,
    exponential,
    laplace,
    randomized_response,
)
from dp_engine.sound.mechanisms import laplace_step

ALPHA = 1e-5
RUNS = 200_000  # vectorized mechanisms: 2e5 runs per dataset
LOOP_RUNS = 20_000  # one call per run


def assert_sound(result: AuditResult) -> None:
    """No violation at the claimed ε; the result line is printed for the docs table (-s)."""
    print(f"AUDIT {os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]} {result.summary()}")
    assert not result.violated, f"privacy violation: {result.summary()}"


def audit(sample_d, sample_d_prime, eps: float, seed: int, **kwargs) -> AuditResult:
    kwargs.setdefault("n_runs", RUNS)
    return audit_scalar(
        sample_d, sample_d_prime, eps, alpha=ALPHA, rng=np.random.default_rng(seed), **kwargs
    )


@pytest.mark.parametrize(
    ("x", "x_prime", "sensitivity", "eps"),
    [(0.0, 1.0, 1.0, 1.0), (0.1, 3.1, 3.0, 0.5), (0.0, 1.0, 1.0, 4.0)],
)
def test_laplace_vectorized(x, x_prime, sensitivity, eps):
    """Each element of a vector call gets ε-DP noise for its own Δ (the marginal law)."""

    def sampler(v: float):
        return lambda rng, n: laplace(np.full(n, v), sensitivity, eps, rng=rng)

    result = audit(sampler(x), sampler(x_prime), eps, seed=101)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.7 * eps  # the audit has power: it sees most of ε


def test_laplace_scalar_calls():
    eps = 1.0

    def sampler(v: float):
        return looped(lambda rng: laplace(v, 1.0, eps, rng=rng))

    assert_sound(audit(sampler(0.3), sampler(1.3), eps, seed=102, n_runs=LOOP_RUNS))


def test_laplace_outputs_lie_on_one_power_of_two_lattice():
    """Mironov-style holes: the set of reachable outputs must not depend on the input.

    Every output, from inputs that are not on the lattice, is an exact multiple of one
    power-of-two step fixed by (Δ, ε, changed) alone, so the support is the same lattice
    whatever the input; the divisibility events of the auditor (part of every scalar audit
    above) then find nothing to separate the inputs.
    """
    eps, sensitivity, k = 1.0, 1.0, 8
    rng = np.random.default_rng(103)
    step = laplace_step(sensitivity, eps)
    assert step == 2.0 ** np.floor(np.log2(step))  # a power of two
    for v in (0.1, 0.3, 1e-9, -2.7):
        out = np.array([laplace(v, sensitivity, eps, rng=rng) for _ in range(2_000)])
        assert np.all(np.mod(out / step, 1.0) == 0.0)
        assert len(np.unique(out)) > 1_000  # the lattice is fine, not a coarse rounding
    vec_step = laplace_step(sensitivity, eps, k)
    out = laplace(np.full((5_000, k), 0.1), sensitivity, eps, changed=k, rng=rng)
    assert np.all(np.mod(out / vec_step, 1.0) == 0.0)


def test_laplace_vector_query_where_one_record_moves_every_element():
    """changed = k: the record spreads Δ over k elements; the joint output must stay ε-DP."""
    eps, sensitivity, k = 1.0, 1.0, 4

    def sampler(v: float):
        return lambda rng, n: laplace(np.full((n, k), v), sensitivity, eps, changed=k, rng=rng)

    result = audit_vector(
        sampler(0.0),
        sampler(sensitivity / k),
        eps,
        n_runs=100_000,
        alpha=ALPHA,
        rng=np.random.default_rng(109),
    )
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.3 * eps  # a sum of 4 Laplace: a softer edge


BOUNDED_CASES = [
    (0.0, 1.0, 0.0, 1.0, 1.0, 1.0),  # the whole range: truncation on both sides
    (0.0, 10.0, 0.0, 0.5, 0.5, 1.0),  # a small step at the edge, where mass is cut
    (-1.0, 1.0, -1.0, 1.0, 2.0, 0.5),
]


def bounded_sampler(lower, upper, sensitivity, eps, v):
    return lambda rng, n: bounded_laplace(np.full(n, v), lower, upper, sensitivity, eps, rng=rng)


@pytest.mark.parametrize(("lower", "upper", "x", "x_prime", "sensitivity", "eps"), BOUNDED_CASES)
def test_bounded_laplace_law_at_the_edges(lower, upper, x, x_prime, sensitivity, eps):
    """The real-valued law (thresholds and value sets only): Holohan's scale is enough."""
    result = audit(
        bounded_sampler(lower, upper, sensitivity, eps, x),
        bounded_sampler(lower, upper, sensitivity, eps, x_prime),
        eps,
        seed=106,
        bit_events=False,
    )
    assert_sound(result)


@pytest.mark.parametrize(("lower", "upper", "x", "x_prime", "sensitivity", "eps"), BOUNDED_CASES)
def test_bounded_laplace_has_no_floating_point_holes(lower, upper, x, x_prime, sensitivity, eps):
    """The released doubles themselves, low-order bits included (Mironov 2012).

    x + offset computed in floating point keeps the fine bits of the offset near 0 but
    not near 1, so "y is not a multiple of 2^-53" separates the inputs unless the output
    is snapped to a power-of-two grid as ``laplace`` does.
    """
    result = audit(
        bounded_sampler(lower, upper, sensitivity, eps, x),
        bounded_sampler(lower, upper, sensitivity, eps, x_prime),
        eps,
        seed=106,
    )
    assert_sound(result)


@pytest.mark.parametrize(("categories", "eps"), [(["no", "yes"], 1.0), (["a", "b", "c", "d"], 2.0)])
def test_randomized_response(categories, eps):
    codes = {c: i for i, c in enumerate(categories)}

    def sampler(v: str):
        def sample(rng, n):
            out = randomized_response(np.array([v] * n, dtype=object), categories, eps, rng=rng)
            return np.array([codes[c] for c in out])

        return sample

    result = audit(sampler(categories[0]), sampler(categories[1]), eps, seed=107)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.8 * eps


def test_exponential_mechanism_on_its_worst_utility_change():
    """Utilities move by ±Δ in opposite directions: the ratio for candidate 0 nears e^ε."""
    k, sensitivity, eps = 50, 1.0, 1.0
    cands = list(range(k))
    base = np.zeros(k)
    moved = np.full(k, -sensitivity)
    moved[0] = sensitivity

    def sampler(util: np.ndarray):
        return looped(lambda rng: exponential(cands, util, sensitivity, eps, rng=rng))

    result = audit(sampler(base), sampler(moved), eps, seed=108, n_runs=LOOP_RUNS)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.3 * eps  # 1e4 held-out runs: a looser bound
