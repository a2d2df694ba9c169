"""Sound-mode mechanisms: each sampler matches its law, outputs are lattice points, bad input.

Distribution tests use fixed seeds and reject at ALPHA = 1e-4 each, so with about
twenty such tests the chance of a false failure on a correct sampler is below 0.2 %
(and, with fixed seeds, the outcome is reproducible).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dp_engine.errors import (
    DataTypeError,
    EmptyDataError,
    InvalidBoundsError,
    InvalidEpsilonError,
    UnknownCategoryError,
)
from dp_engine.sound import (
    bounded_laplace,
    exponential,
    laplace,
    randomized_response,
)
from dp_engine.sound.mechanisms import (
    bounded_laplace_plan,
    bounded_laplace_scale,
    dlap_noise,
    laplace_step,
)

ALPHA = 1e-4
N = 200_000


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def chi2_pvalue(samples: np.ndarray, support: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness of fit; cells with expected count < 5 are pooled with the outside."""
    n = samples.size
    probs = probs / probs.sum()
    expected = n * probs
    big = expected >= 5
    index = {v: i for i, v in enumerate(support[big].tolist())}
    observed = np.zeros(big.sum() + 1)
    values, counts = np.unique(samples, return_counts=True)
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        observed[index.get(v, big.sum())] += c
    exp_cells = np.append(expected[big], n - expected[big].sum())
    if exp_cells[-1] < 1e-9:  # nothing outside: drop the empty pool
        assert observed[-1] == 0, "samples outside the support"
        observed, exp_cells = observed[:-1], exp_cells[:-1]
    exp_cells *= observed.sum() / exp_cells.sum()
    return float(stats.chisquare(observed, exp_cells).pvalue)


def dlap_pmf(t: float, k: np.ndarray) -> np.ndarray:
    a = math.exp(-1.0 / t)
    return (1 - a) / (1 + a) * a ** np.abs(k)


# ---------------------------------------------------------------- laws


@pytest.mark.parametrize("t", [0.3, 1.0, 7.5, 40.0])
def test_discrete_laplace_noise_has_the_discrete_laplace_law(t):
    k = dlap_noise(t, N, rng(1))
    assert np.array_equal(k, np.rint(k))
    support = np.arange(-int(60 * t) - 5, int(60 * t) + 6)
    assert chi2_pvalue(k, support, dlap_pmf(t, support)) > ALPHA


@pytest.mark.parametrize(
    ("x", "sens", "eps"), [(0.0, 1.0, 1.0), (123.456, 3.0, 0.2), (-5e-3, 0.01, 2)]
)
def test_laplace_matches_the_laplace_law(x, sens, eps):
    """The lattice step is ≤ 2^-12 of the scale, so the CDF differs from Laplace's by < 1e-4,
    far below the KS critical value (≈ 0.0068 at n = 2e5, α = 1e-4)."""
    out = laplace(np.full(N, x), sens, eps, rng=rng(4))
    # the scale is raised by (Δ + Λ)/Δ to pay for snapping
    step = laplace_step(sens, eps)
    scale = (sens + step) / eps
    assert scale <= sens / eps * (1 + 2.0**-12)
    assert stats.kstest(out, stats.laplace(loc=x, scale=scale).cdf).pvalue > ALPHA


def test_laplace_outputs_lie_on_a_power_of_two_lattice():
    x = np.linspace(0.1, 0.9, 1000) * math.pi
    out = laplace(x, 1.0, 1.0, rng=rng(5))
    step = laplace_step(1.0, 1.0)
    assert math.log2(step).is_integer()
    assert np.array_equal(out / step, np.rint(out / step))
    scalar = laplace(0.3, 1.0, 1.0, rng=rng(5))
    assert isinstance(scalar, float)
    assert (scalar / step).is_integer()
    # a vector query moved by one record in every element: finer lattice, same scale bound
    vec = laplace(x, 1.0, 0.5, changed=x.size, rng=rng(5))
    fine = laplace_step(1.0, 0.5, x.size)
    assert fine < laplace_step(1.0, 0.5)
    assert np.array_equal(vec / fine, np.rint(vec / fine))


def test_laplace_handles_tiny_sensitivities_on_large_vectors():
    """Paper mode noises each record with Δ = (b − a)/n: the lattice must still be exact."""
    x = np.linspace(0, 100, 100_000)
    out = laplace(x, 100 / x.size, 1.0, rng=rng(5))
    assert np.abs(out - x).mean() == pytest.approx(100 / x.size, rel=0.02)


def test_laplace_preserves_shape():
    out = laplace(np.zeros((3, 4)), 1.0, 1.0, rng=rng(6))
    assert out.shape == (3, 4)


def bounded_cdf(x, lower, upper, sens, eps):
    """Exact CDF of the lattice bounded Laplace output for input x (for the KS test)."""
    step, scale, first, last = bounded_laplace_plan(sens, eps, lower, upper)
    points = np.arange(first, last + 1) * step
    centre = np.clip(np.rint(x / step), first, last) * step
    pmf = np.exp(-np.abs(points - centre) / scale)
    cdf = np.cumsum(pmf) / pmf.sum()

    def f(y):
        return np.where(
            y < points[0], 0.0, cdf[np.clip(np.searchsorted(points, y, "right") - 1, 0, None)]
        )

    return f


@pytest.mark.parametrize(
    ("x", "lower", "upper", "sens", "eps"),
    [(0.0, 0.0, 1.0, 1.0, 1.0), (0.3, 0.0, 10.0, 0.5, 1.0), (0.9, -1.0, 1.0, 2.0, 0.5)],
)
def test_bounded_laplace_has_the_truncated_law_inside_the_bounds(x, lower, upper, sens, eps):
    out = bounded_laplace(np.full(N, x), lower, upper, sens, eps, rng=rng(8))
    assert out.min() >= lower and out.max() <= upper
    assert stats.kstest(out, bounded_cdf(x, lower, upper, sens, eps)).pvalue > ALPHA


def test_bounded_laplace_scale_is_near_holohans_and_above_the_plain_one():
    for sens, eps, lo, hi in [(1.0, 1.0, 0.0, 1.0), (0.5, 1.0, 0.0, 10.0), (1.0, 0.1, 0.0, 1.0)]:
        step, scale, _, _ = bounded_laplace_plan(sens, eps, lo, hi)
        holohan = bounded_laplace_scale(sens, eps, lo, hi)
        assert holohan > sens / eps
        assert scale == pytest.approx(holohan, rel=2e-3)
        assert math.log2(step).is_integer()


def test_bounded_laplace_outputs_are_lattice_points_and_clamp_inputs():
    out = bounded_laplace(np.array([-50.0, 0.123, 99.0]), 0.0, 1.0, 1.0, 1.0, rng=rng(9))
    step, *_ = bounded_laplace_plan(1.0, 1.0, 0.0, 1.0)
    assert np.array_equal(out / step, np.rint(out / step))
    assert ((out >= 0) & (out <= 1)).all()


@pytest.mark.parametrize(("categories", "eps"), [(["no", "yes"], 1.0), (list("abcde"), 0.7)])
def test_randomized_response_law(categories, eps):
    k = len(categories)
    out = randomized_response(
        np.array([categories[0]] * N, dtype=object), categories, eps, rng=rng(10)
    )
    codes = np.array([categories.index(c) for c in out])
    keep = math.exp(eps) / (math.exp(eps) + k - 1)
    probs = np.array([keep] + [(1 - keep) / (k - 1)] * (k - 1))
    assert chi2_pvalue(codes, np.arange(k), probs) > ALPHA


def test_randomized_response_scalar_and_unknown_category():
    assert randomized_response("yes", ["no", "yes"], 5.0, rng=rng(11)) in ("no", "yes")
    with pytest.raises(UnknownCategoryError, match="maybe"):
        randomized_response(["yes", "maybe"], ["no", "yes"], 1.0)
    with pytest.raises(InvalidBoundsError):
        randomized_response(["a"], ["a"], 1.0)


def test_exponential_mechanism_law():
    utilities = np.array([0.0, 1.0, 2.0, -1.0, 0.5, -np.inf])
    cands = list("abcdef")
    eps, sens = 1.3, 0.8
    gen = rng(12)
    draws = np.array(
        [cands.index(exponential(cands, utilities, sens, eps, rng=gen)) for _ in range(20_000)]
    )
    logits = eps * utilities / (2 * sens)
    probs = np.exp(logits - logits[np.isfinite(logits)].max())
    assert (draws != 5).all()  # −inf utility is never chosen
    assert chi2_pvalue(draws, np.arange(5), probs[:5]) > ALPHA


def test_exponential_is_stable_for_huge_utilities():
    assert exponential([1, 2], [1e300, 0.0], 1.0, 1.0, rng=rng(13)) == 1


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("eps", [0, -1, math.inf, math.nan, "one", None])
def test_bad_epsilon_is_refused_by_every_mechanism(eps):
    calls = [
        lambda: laplace(1.0, 1.0, eps),
        lambda: bounded_laplace(0.5, 0, 1, 1.0, eps),
        lambda: randomized_response("a", ["a", "b"], eps),
        lambda: exponential([0, 1], [0, 1], 1.0, eps),
    ]
    for call in calls:
        with pytest.raises(InvalidEpsilonError, match="privacy parameter"):
            call()


@pytest.mark.parametrize("sens", [0, -2, math.inf, math.nan])
def test_bad_sensitivity(sens):
    with pytest.raises(InvalidBoundsError, match="sensitivity"):
        laplace(1.0, sens, 1.0)


def test_bad_values_and_bounds():
    with pytest.raises(DataTypeError, match="numeric"):
        laplace(np.array(["a", "b"]), 1.0, 1.0)
    with pytest.raises(DataTypeError, match="missing or infinite"):
        laplace(np.array([1.0, np.nan]), 1.0, 1.0)
    with pytest.raises(EmptyDataError):
        laplace(np.array([]), 1.0, 1.0)
    with pytest.raises(InvalidBoundsError, match="smaller than"):
        bounded_laplace(0.5, 1.0, 0.0, 1.0, 1.0)
    with pytest.raises(InvalidBoundsError, match="finite"):
        bounded_laplace(0.5, 0.0, math.inf, 1.0, 1.0)
    with pytest.raises(DataTypeError, match="one utility per candidate"):
        exponential([1, 2, 3], [0.0, 1.0], 1.0, 1.0)
    with pytest.raises(DataTypeError, match="finite"):
        exponential([1, 2], [np.nan, 1.0], 1.0, 1.0)


def test_laplace_refuses_values_too_large_for_an_exact_lattice():
    with pytest.raises(DataTypeError, match="too large"):
        laplace(1e300, 1.0, 1.0)
