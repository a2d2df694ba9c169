"""calibrate: terminates, meets the band where reachable, monotone, agrees with the labels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_engine.bands import NOISE_BANDS
from dp_engine.errors import (
    DataTypeError,
    InvalidBoundsError,
    InvalidEpsilonError,
    UnknownQueryError,
)
from dp_engine.sound import (
    calibrate,
    count,
    expected_relative_error,
    grouped_histogram,
    mean,
    quantiles,
    variance,
)
from dp_engine.sound.calibrate import DEFAULT_GRID

SETTINGS = settings(max_examples=40, deadline=None)

queries = st.fixed_dictionaries(
    {
        "statistic": st.sampled_from(["count", "histogram", "mean", "variance", "quantiles"]),
        "n": st.floats(0.0, 1e7),
        "lower": st.floats(-100.0, 100.0),
        "width": st.floats(0.01, 1e4),
        "bins": st.integers(1, 50),
        "n_groups": st.integers(1, 8),
    }
)


def run(q: dict, factor: int, grid=None):
    return calibrate(
        factor,
        q["statistic"],
        n=q["n"],
        lower=q["lower"],
        upper=q["lower"] + q["width"],
        bins=q["bins"],
        n_groups=q["n_groups"],
        epsilon_grid=grid,
    )


def error_at(q: dict, eps: float) -> float:
    return expected_relative_error(
        q["statistic"],
        eps,
        n=q["n"],
        lower=q["lower"],
        upper=q["lower"] + q["width"],
        bins=q["bins"],
        n_groups=q["n_groups"],
    )


@SETTINGS
@given(queries)
def test_calibrate_ends_meets_reachable_bands_and_is_monotone(q):
    results = [run(q, f) for f in (0, 1, 2)]
    grid = DEFAULT_GRID
    for f, res in enumerate(results):
        low, high = NOISE_BANDS[f]
        assert res.epsilon in grid and res.band == (low, high) and res.noise_factor == f
        assert len(res.steps) <= math.ceil(math.log2(grid.size)) + 2  # a bounded search
        assert res.expected_relative_error == pytest.approx(error_at(q, res.epsilon))
        assert res.message
        # brute force over the whole grid: reachable ⇔ some ε has its error in the band
        errs = np.array([error_at(q, e) for e in grid])
        inside = (errs >= low) & (errs <= high)
        assert res.reached == bool(inside.any())
        if res.reached:
            assert low <= res.expected_relative_error <= high
            assert res.epsilon == grid[np.argmax(inside)]  # the most private ε that meets it
    eps = [r.epsilon for r in results]
    assert eps[0] >= eps[1] >= eps[2]  # more noise never costs more ε


def test_unreachable_bands_say_so():
    few = calibrate(0, "mean", n=1, lower=0, upper=100)
    assert not few.reached and few.epsilon == DEFAULT_GRID[-1]
    assert "cannot be met" in few.message and "0–5 %" in few.message
    many = calibrate(2, "count", n=1e9)
    assert not many.reached and many.epsilon == DEFAULT_GRID[0]
    assert "smallest" in many.message
    zero = calibrate(1, "histogram", n=0, bins=10)
    assert math.isfinite(zero.expected_relative_error) and zero.epsilon in DEFAULT_GRID


def test_a_band_between_two_grid_points_returns_the_closest():
    # errors at n = 1000: ε = 0.005 → ≈ 20 %, ε = 1 → ≈ 0.085 %; the 5–10 % band lies between
    errs = [expected_relative_error("count", e, n=1000) for e in (0.005, 1.0)]
    assert errs[0] > 10 and errs[1] < 5 and errs[0] - 10 > 5 - errs[1]
    res = calibrate(1, "count", n=1000, epsilon_grid=[1.0, 0.005])
    assert not res.reached and "closest" in res.message
    assert res.epsilon == 1.0 and res.expected_relative_error == pytest.approx(errs[1])


def test_calibration_agrees_with_the_release_labels():
    """The ε chosen from public metadata gives releases whose labelled error is on target."""
    gen = np.random.default_rng(40)
    x = gen.uniform(0, 80, 4000)
    n = 4000
    for stat, fn, scale in (
        ("mean", lambda e: mean(x, 0, 80, e, n_estimate=n, rng=gen), 80),
        ("variance", lambda e: variance(x, 0, 80, e, n_estimate=n, rng=gen), 40**2),
        ("quantiles", lambda e: quantiles(x, 0, 80, e, n_estimate=n, rng=gen), 80),
        ("count", lambda e: count(x, e, rng=gen), n),
    ):
        cal = calibrate(1, stat, n=n, lower=0, upper=80)
        assert cal.reached, cal.message
        rel = fn(cal.epsilon)
        label = 100 * float(np.mean(rel.expected_error)) / scale
        assert label == pytest.approx(cal.expected_relative_error, rel=1e-9)
    cal = calibrate(2, "histogram", n=n, bins=8, n_groups=2)
    h = grouped_histogram(
        x, gen.integers(0, 2, n), np.linspace(0, 80, 9), [0, 1], cal.epsilon, rng=gen
    )
    assert 100 * h.expected_error[0, 0] / (n / 16) == pytest.approx(cal.expected_relative_error)


def test_calibrate_bad_input():
    cases = [
        (UnknownQueryError, "noise factor", lambda: calibrate(3, "mean", n=10, lower=0, upper=1)),
        (UnknownQueryError, "Unknown statistic", lambda: calibrate(0, "median", n=10)),
        (UnknownQueryError, "bins", lambda: calibrate(0, "histogram", n=10)),
        (UnknownQueryError, "n_groups", lambda: calibrate(0, "count", n=10, n_groups=0)),
        (DataTypeError, "DP-released count", lambda: calibrate(0, "count", n=math.nan)),
        (InvalidBoundsError, "bounds", lambda: calibrate(0, "mean", n=10)),
        (InvalidEpsilonError, "grid", lambda: calibrate(0, "count", n=10, epsilon_grid=[0.1, -1])),
        (InvalidEpsilonError, "grid", lambda: calibrate(0, "count", n=10, epsilon_grid=[])),
    ]
    for error, text, call in cases:
        with pytest.raises(error, match=text):
            call()
