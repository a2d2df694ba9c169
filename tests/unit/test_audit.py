"""Tests of the empirical privacy auditor itself (dp_engine.audit).

Reference mechanisms are written here in plain numpy. Their noise is rounded to a 2^-20
grid before the (integer) input is added, so the output is exact in floating point and
follows the ideal discretized law: the ε they claim is then really true, and any flag
would be the auditor's fault. A correct mechanism is flagged with probability ≤ α; the
"not flagged" tests use α = 1e-5, so each fails falsely with probability ≤ 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dp_engine.audit import AuditResult, audit_scalar, audit_vector, clopper_pearson

ALPHA = 1e-5
GRID = 2.0**20


def grid_laplace(value: float, scale: float):
    """Sampler of value + Laplace(scale), exact on a 2^-20 grid (no float holes)."""
    return lambda rng, n: value + np.round(rng.laplace(0.0, scale, n) * GRID) / GRID


def run(audit, sample_d, sample_d_prime, eps: float, seed: int, **kwargs) -> AuditResult:
    """One audit at the file's α and 1e5 runs unless told otherwise, seeded."""
    kwargs.setdefault("n_runs", 100_000)
    kwargs.setdefault("alpha", ALPHA)
    return audit(sample_d, sample_d_prime, eps, rng=np.random.default_rng(seed), **kwargs)


def randomized_response(bit: int, epsilon: float):
    """Binary randomized response: keeps the bit with probability e^ε / (1 + e^ε)."""
    keep = np.exp(epsilon) / (1.0 + np.exp(epsilon))
    return lambda rng, n: np.where(rng.random(n) < keep, bit, 1 - bit)


# --- Clopper–Pearson -------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n", "alpha"), [(5, 10, 0.05), (1, 50, 0.01), (37, 400, 1e-3)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n, alpha):
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="exact")
    low, high = clopper_pearson(k, n, alpha)
    assert low == pytest.approx(ref.low, abs=1e-10)
    assert high == pytest.approx(ref.high, abs=1e-10)


def test_clopper_pearson_textbook_value():
    # The classic 5 successes in 10 trials, 95 %: (0.1871, 0.8129).
    low, high = clopper_pearson(5, 10, 0.05)
    assert (round(low, 4), round(high, 4)) == (0.1871, 0.8129)


def test_clopper_pearson_closed_forms_at_the_edges():
    n, alpha = 200, 0.01
    assert clopper_pearson(0, n, alpha) == (0.0, pytest.approx(1 - (alpha / 2) ** (1 / n)))
    assert clopper_pearson(n, n, alpha) == (pytest.approx((alpha / 2) ** (1 / n)), 1.0)


@pytest.mark.parametrize(
    ("k", "n", "alpha"), [(-1, 10, 0.05), (11, 10, 0.05), (1, 0, 0.05), (1, 10, 0.0), (1, 10, 1.0)]
)
def test_clopper_pearson_rejects_bad_input(k, n, alpha):
    with pytest.raises(ValueError):
        clopper_pearson(k, n, alpha)


# --- scalar audits ---------------------------------------------------------------------


def test_correct_laplace_is_not_flagged_and_bound_is_tight():
    eps = 1.0
    result = run(
        audit_scalar, grid_laplace(0, 1 / eps), grid_laplace(1, 1 / eps), eps, 11, n_runs=200_000
    )
    assert isinstance(result, AuditResult)
    assert not result.violated
    assert result.epsilon_lower_bound <= eps
    # The search must find a good event, not just an empty one: the bound is close to ε.
    assert result.epsilon_lower_bound > 0.8
    assert result.confidence == 1 - ALPHA and result.n_runs == 200_000


def test_laplace_with_half_the_scale_is_flagged():
    eps = 1.0  # claimed; the true ε of scale 1/(2ε) is 2
    result = run(
        audit_scalar,
        grid_laplace(0, 0.5 / eps),
        grid_laplace(1, 0.5 / eps),
        eps,
        12,
        n_runs=200_000,
    )
    assert result.violated
    assert eps < result.epsilon_lower_bound <= 2 * eps


def test_flags_in_the_reverse_direction_too():
    eps = 0.5  # D' above D: the leaking event is on the other side
    result = run(audit_scalar, grid_laplace(3, 0.5 / eps), grid_laplace(2, 0.5 / eps), eps, 13)
    assert result.violated


def test_randomized_response_bound_is_conservative_over_many_seeds():
    """Coverage: at α = 0.05 each audit of an exactly-ε mechanism errs with prob. ≤ 0.05.

    Binary randomized response attains its ε on a single event, so this is the hardest
    case for conservativeness. Over 200 independent audits the number of violations is
    stochastically ≤ Binomial(200, 0.05); 25 or more has probability < 3e-5.
    """
    eps, runs, alpha, audits = 1.0, 20_000, 0.05, 200
    assert stats.binom.sf(24, audits, alpha) < 3e-5
    bounds = [
        run(
            audit_scalar,
            randomized_response(0, eps),
            randomized_response(1, eps),
            eps,
            1000 + s,
            n_runs=runs,
            alpha=alpha,
        )
        for s in range(audits)
    ]
    assert sum(b.violated for b in bounds) < 25
    assert all(b.event.startswith("S = {y") for b in bounds)


def test_delta_absorbs_a_rare_catastrophe_but_not_a_pure_claim():
    """With probability 0.01 the mechanism prints its input: (ε, 0.01)-DP, not ε-DP."""
    eps, leak = 1.0, 0.01

    def leaky(value: float):
        base = grid_laplace(value, 1 / eps)

        def sample(rng, n):
            out = base(rng, n)
            return np.where(rng.random(n) < leak, 1000.0 + value, out)

        return sample

    pure = run(audit_scalar, leaky(0.0), leaky(1.0), eps, 14)
    assert pure.violated and pure.epsilon_lower_bound > 3
    approx = run(audit_scalar, leaky(0.0), leaky(1.0), eps, 14, delta=leak)
    assert not approx.violated and approx.delta == leak


def test_textbook_float_laplace_leaks_through_its_low_order_bits():
    """Mironov (2012): x + Laplace in doubles has input-dependent holes in its support.

    Near 1.0 every double is a multiple of 2^-53, while Laplace noise near 0 is much finer,
    so "y is not a multiple of 2^-53" happens from input 0 and never from input 1.
    """

    def naive(value: float):
        return lambda r, n: value + r.laplace(0.0, 1.0, n)

    result = run(audit_scalar, naive(0.0), naive(1.0), 1.0, 15)
    assert result.violated and result.epsilon_lower_bound > 5
    assert "multiple of 2^" in result.event
    # Without the divisibility events the same sampler looks like an ideal ε = 1 Laplace.
    blind = run(audit_scalar, naive(0.0), naive(1.0), 1.0, 15, bit_events=False)
    assert not blind.violated


def test_integer_outputs_get_value_set_events():
    """A 5-valued output where only the middle value leaks: thresholds cannot isolate it."""

    def sampler(leaks: bool):
        def sample(rng, n):
            probs = np.array([0.2, 0.2, 0.2, 0.2, 0.2])
            if leaks:
                probs = np.array([0.2, 0.2, 0.02, 0.29, 0.29])
            return rng.choice(5, size=n, p=probs)

        return sample

    result = run(audit_scalar, sampler(False), sampler(True), 1.0, 16)
    assert result.violated and "2" in result.event


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(claimed_epsilon=-1.0),
        dict(claimed_epsilon=np.inf),
        dict(delta=1.0),
        dict(n_runs=2),
        dict(alpha=0.0),
    ],
)
def test_audit_rejects_bad_parameters(kwargs):
    params = dict(claimed_epsilon=1.0, delta=0.0, n_runs=100, alpha=0.01)
    params.update(kwargs)
    eps = params.pop("claimed_epsilon")
    with pytest.raises(ValueError):
        audit_scalar(
            grid_laplace(0, 1), grid_laplace(1, 1), eps, rng=np.random.default_rng(0), **params
        )


def test_sampler_returning_the_wrong_number_of_runs_is_refused():
    with pytest.raises(ValueError, match="expected 100"):
        audit_scalar(
            lambda r, n: np.zeros(n - 1),
            grid_laplace(1, 1),
            1.0,
            n_runs=100,
            rng=np.random.default_rng(0),
        )


# --- vector audits ---------------------------------------------------------------------


def grid_vector(shift: np.ndarray, scale: float):
    return lambda rng, n: shift + np.round(rng.laplace(0.0, scale, (n, shift.size)) * GRID) / GRID


def test_correct_histogram_is_not_flagged():
    eps, cells = 1.0, np.array([3.0, 0.0, 7.0, 1.0])
    added = cells + np.array([0.0, 0.0, 1.0, 0.0])  # D' adds one record to cell 2
    result = run(audit_vector, grid_vector(cells, 1 / eps), grid_vector(added, 1 / eps), eps, 21)
    assert not result.violated and result.epsilon_lower_bound > 0.7


def test_histogram_with_half_the_scale_is_flagged_on_its_cell():
    eps, cells = 1.0, np.array([3.0, 0.0, 7.0, 1.0])
    added = cells + np.array([0.0, 0.0, 1.0, 0.0])
    result = run(
        audit_vector, grid_vector(cells, 0.5 / eps), grid_vector(added, 0.5 / eps), eps, 22
    )
    assert result.violated


def test_leak_spread_over_coordinates_is_caught_by_the_projection():
    """Each coordinate alone is ε-DP, but the vector leaks 4ε (L1 sensitivity ignored)."""
    eps, k = 1.0, 4
    shift = np.full(k, 1.0 / k)
    sample_d = grid_vector(np.zeros(k), 1 / (k * eps))
    sample_p = grid_vector(shift, 1 / (k * eps))
    result = run(audit_vector, sample_d, sample_p, eps, 23)
    assert result.violated and "projection" in result.event
