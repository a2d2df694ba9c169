"""dp_calculate and Algorithm 1: types round-trip, the search trace, bands, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_engine.bands import NOISE_BANDS
from dp_engine.errors import (
    DataTypeError,
    EmptyDataError,
    InvalidBoundsError,
    InvalidEpsilonError,
    UnknownCategoryError,
    UnknownQueryError,
)
from dp_engine.paper import (
    DEFAULT_EPSILONS,
    PaperResult,
    binary_search_epsilon,
    dp_calculate,
    noise_percent,
)
from dp_engine.paper.search import unit_laplace

AGES = np.random.default_rng(20240501).normal(65.0, 8.0, 400).round(1)


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def assert_valid_trace(result_steps, grid_size: int, band, found: bool) -> None:
    """Each step halves a window of the grid the way a terminating binary search must."""
    assert len(result_steps) >= 1
    assert len(result_steps) <= math.floor(math.log2(grid_size)) + 1
    low, high = 0, grid_size - 1
    for i, step in enumerate(result_steps):
        assert (step.low_idx, step.high_idx) == (low, high)
        assert step.mid_idx == (low + high) // 2
        lo_band, hi_band = band
        if step.verdict == "in band":
            assert lo_band <= step.noise_percent <= hi_band
            assert i == len(result_steps) - 1
        elif step.verdict == "too little noise":
            assert step.noise_percent < lo_band
            high = step.mid_idx - 1
        else:
            assert step.verdict == "too much noise"
            assert step.noise_percent > hi_band
            low = step.mid_idx + 1
    last = result_steps[-1]
    if found:
        assert last.verdict == "in band"
    else:
        assert last.verdict != "in band"
        assert low > high  # the window is exhausted, not abandoned


# --- bands are met where reachable --------------------------------------------------------


@pytest.mark.parametrize("query", [1, 2, 3, 4])
@pytest.mark.parametrize("noise_factor", [0, 1, 2])
@pytest.mark.parametrize("is_range", [False, True])
def test_band_met_on_ages(query, noise_factor, is_range):
    res = dp_calculate(AGES, query, noise_factor, float, is_range, rng=rng())
    assert res.found
    assert res.band == NOISE_BANDS[noise_factor]
    assert res.epsilon == res.steps[-1].epsilon
    assert_valid_trace(res.steps, DEFAULT_EPSILONS.size, res.band, res.found)
    # the reported realized noise is the public definition applied to the released data
    # (float32 denominators in the engine: agreement to ~1e-7 relative)
    assert res.noise_percent == pytest.approx(noise_percent(AGES, res.dp_data), rel=1e-5)
    if is_range:
        assert AGES.min() - 1e-9 <= min(res.dp_data) and max(res.dp_data) <= AGES.max() + 1e-9


def test_unreachable_band_is_reported_not_found_with_the_closest_epsilon():
    # A constant column fitted to its range can never be noised: 0 % for every ε.
    res = dp_calculate([3.0, 3.0, 3.0, 3.0], 2, 1, float, True, rng=rng())
    assert not res.found
    assert all(s.noise_percent == 0.0 for s in res.steps)
    assert res.epsilon == min(s.epsilon for s in res.steps)  # ties go to more noise
    assert_valid_trace(res.steps, DEFAULT_EPSILONS.size, res.band, res.found)
    assert res.dp_data == [3.0, 3.0, 3.0, 3.0]
    assert res.effective_epsilon == math.inf  # released exactly


def test_grid_too_coarse_for_the_band_is_not_found():
    # one huge ε: far too little noise for the high band; one tiny ε: far too much
    res = dp_calculate(AGES, 2, 2, float, epsilons=[1e6], rng=rng())
    assert not res.found and res.epsilon == 1e6 and res.steps[0].verdict == "too little noise"
    res = dp_calculate(AGES, 2, 0, float, epsilons=[1e-9], rng=rng())
    assert not res.found and res.steps[0].verdict == "too much noise"
    # the closest of the probed ε is returned
    grid = [1e-9, 1e-6, 1e6]
    res = dp_calculate(AGES, 2, 1, float, epsilons=grid, rng=rng())
    lo, hi = res.band
    misses = [max(lo - s.noise_percent, s.noise_percent - hi) for s in res.steps]
    assert not res.found
    assert res.epsilon == res.steps[int(np.argmin(misses))].epsilon


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=40
    ),
    noise_factor=st.sampled_from([0, 1, 2]),
    query=st.sampled_from([1, 2, 3, 4]),
    is_range=st.booleans(),
    kind=st.sampled_from(["float", "int", "bool", "str"]),
    grid_size=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
)
def test_search_always_terminates_with_a_valid_trace(
    values, noise_factor, query, is_range, kind, grid_size, seed
):
    data: list = values
    if kind == "int":
        data = [int(v) for v in values]
    elif kind == "bool":
        data = [v > 0 for v in values]
    elif kind == "str":
        data = [f"c{int(abs(v)) % 4}" for v in values]
        query = 1 if query in (2, 4) else query
    grid = np.geomspace(1e-8, 1e4, grid_size)
    res = dp_calculate(data, query, noise_factor, kind, is_range, epsilons=grid, rng=rng(seed))
    assert_valid_trace(res.steps, grid.size, res.band, res.found)
    assert len(res.dp_data) == len(data)
    if not res.found:
        lo, hi = res.band
        best = min(max(lo - s.noise_percent, s.noise_percent - hi) for s in res.steps)
        chosen = next(s for s in res.steps if s.epsilon == res.epsilon)
        assert max(lo - chosen.noise_percent, chosen.noise_percent - hi) == best


# --- the vectorized probe equals the paper's loop --------------------------------------------


@pytest.mark.parametrize(
    ("data", "kind", "is_range"),
    [
        (AGES, "float", False),
        (AGES, "float", True),
        (np.rint(AGES), "int", False),
        (np.rint(AGES), "int", True),
        (np.arange(400) % 2, "bool", False),
        (np.arange(400) % 5, "category", True),
        # above the block size: the row-by-row path
        (np.random.default_rng(8).normal(65.0, 8.0, 60_000), "float", True),
        (np.random.default_rng(8).integers(40, 90, 60_000), "int", True),
        (np.random.default_rng(8).integers(0, 2, 60_000), "bool", False),
    ],
)
def test_search_noise_equals_five_explicit_repetitions(data, kind, is_range):
    """Each probe's noise % is the mean over 5 repetitions of the paper's per-datum loop."""
    x = np.asarray(data, dtype=float)
    sens = (x.max() - x.min()) / x.size
    eps, found, steps, noised = binary_search_epsilon(
        x, sens, 1, epsilons=DEFAULT_EPSILONS, is_range=is_range, data_type=kind, rng=rng(3)
    )
    unit = unit_laplace(rng(3), 5, x.size).astype(float)  # the same draw, replayed
    lo, hi = x.min(), x.max()
    for step in steps:
        total = 0.0
        for r in range(5):
            row = x + (sens / step.epsilon) * unit[r]
            if kind == "bool":
                row = (row > 0.5).astype(float)
            elif is_range or kind == "category":
                row = (hi - lo) * (row - row.min()) / (row.max() - row.min()) + lo
                if kind != "float":
                    row = np.rint(row)
            elif kind == "int":
                row = np.rint(row)
            total += noise_percent(x, row)
        assert step.noise_percent == pytest.approx(total / 5, rel=2e-4, abs=1e-6)
    assert found and eps == steps[-1].epsilon
    if kind == "float" and not is_range:  # Eq. 3 exactly: x' = x + Lap(S_f/ε)
        np.testing.assert_allclose(noised, x + (sens / eps) * unit[0], rtol=1e-12)


def test_unit_noise_is_laplace_with_independent_signs():
    # KS tests at a fixed seed, each at alpha 1e-4 (false-failure probability <= 4e-4).
    noise = unit_laplace(rng(11), 5, 20_000).astype(float)
    assert stats.kstest(noise.ravel(), stats.laplace.cdf).pvalue > 1e-4
    # magnitudes are Exp(1) on either side of 0, so the sign carries no size information
    assert stats.kstest(noise[noise > 0], stats.expon.cdf).pvalue > 1e-4
    assert stats.kstest(-noise[noise < 0], stats.expon.cdf).pvalue > 1e-4
    # rows are not copies of each other
    assert abs(np.corrcoef(noise[0], noise[1])[0, 1]) < 5 * 20_000**-0.5


# --- data types round-trip ----------------------------------------------------------------


def _calc(data, data_type=None, query=2, is_range=True, **kw) -> PaperResult:
    return dp_calculate(data, query, 2, data_type, is_range, rng=rng(5), **kw)


def test_list_of_floats_comes_back_as_floats():
    out = _calc([1.5, 2.5, 7.25, 3.0], float).dp_data
    assert isinstance(out, list) and all(type(v) is float for v in out)


def test_numpy_float32_stays_float32():
    out = _calc(np.array([1.5, 2.5, 7.25, 3.0], dtype=np.float32), np.float32).dp_data
    assert isinstance(out, np.ndarray) and out.dtype == np.float32


def test_ints_stay_ints_and_within_range():
    out = _calc([30, 41, 55, 70, 62]).dp_data
    assert all(type(v) is int for v in out) and min(out) >= 30 and max(out) <= 70
    arr = _calc(np.array([30, 41, 55, 70, 62], dtype=np.int16), np.int16).dp_data
    assert arr.dtype == np.int16


def test_unsigned_ints_are_clipped_to_the_dtype_not_wrapped():
    out = _calc(np.array([0, 1, 0, 2, 0, 1], dtype=np.uint8), "int", is_range=False).dp_data
    assert out.dtype == np.uint8 and out.max() < 200  # a negative value would wrap to ~255


def test_bools_stay_bools():
    out = _calc([True, False, True, True, False], bool, query=1).dp_data
    assert all(type(v) is bool for v in out)
    arr = _calc(np.array([True, False, True]), np.bool_, query=1).dp_data
    assert arr.dtype == np.bool_


def test_chars_and_strings_map_back_to_their_labels():
    chars = ["a", "b", "c", "a", "b", "a"]
    res = _calc(chars, "char", query=1)
    assert set(res.dp_data) <= set(chars) and len(res.dp_data) == 6
    assert res.data_range == ("a", "b", "c")
    words = np.array(["chr", "y", "n", "acute", "acute on chronic", "n"])
    arr = _calc(words, str, query=3, is_range=False).dp_data  # categories are always fitted
    assert arr.dtype.kind == "U" and set(arr) <= set(words)


def test_categories_order_is_the_code_order():
    res = _calc(["n", "y", "y"], str, query=1, categories=["y", "n", "chr"])
    assert res.data_range == ("y", "n", "chr")
    with pytest.raises(UnknownCategoryError):
        _calc(["n", "maybe"], str, query=1, categories=["y", "n"])


def test_pandas_series_of_each_kind():
    assert _calc(pd.Series([1.0, 2.0, 4.0]), float).dp_data.dtype == np.float64
    res = _calc(pd.Series([1, None, 4, 6], dtype="Int64"))
    assert res.dp_data.dtype == np.int64 and res.n_dropped == 1
    labels = _calc(pd.Series(["y", "n", None, "y"], dtype="string"), query=1)
    assert set(labels.dp_data) <= {"y", "n"} and labels.n_dropped == 1
    assert _calc(pd.Series([True, False, True]), query=1).dp_data.dtype == bool


def test_missing_values_are_dropped_and_counted():
    res = _calc([1.0, math.nan, 3.0, None, 8.0])
    assert res.n_dropped == 2 and res.n_used == 3 and len(res.dp_data) == 3
    assert res.kept.tolist() == [True, False, True, False, True]
    assert res.sensitivity == pytest.approx((8.0 - 1.0) / 3)


def test_same_seed_same_result_and_effective_epsilon():
    a = dp_calculate(AGES, 2, 1, rng=rng(1))
    b = dp_calculate(AGES, 2, 1, rng=rng(1))
    np.testing.assert_array_equal(a.dp_data, b.dp_data)
    assert a.effective_epsilon == pytest.approx(AGES.size * a.epsilon)
    assert dp_calculate(AGES, 1, 1, rng=rng(1)).effective_epsilon == pytest.approx(
        dp_calculate(AGES, 1, 1, rng=rng(1)).epsilon
    )


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"data": []}, EmptyDataError),
        ({"data": [math.nan, None]}, EmptyDataError),
        ({"data": pd.Series([], dtype=float)}, EmptyDataError),
        ({"query_type": 7}, UnknownQueryError),
        ({"query_type": "mode"}, UnknownQueryError),
        ({"query_type": True}, UnknownQueryError),
        ({"noise_factor": 3}, UnknownQueryError),
        ({"noise_factor": 1.5}, UnknownQueryError),
        ({"data": ["a", "b"], "query_type": 2}, DataTypeError),
        ({"data": ["a", "b"], "query_type": 4}, DataTypeError),
        ({"data": ["a", "b"], "data_type": float}, DataTypeError),
        ({"data": ["a", 1.0]}, DataTypeError),
        ({"data": [0, 2], "data_type": bool}, DataTypeError),
        ({"data": ["ab", "c"], "data_type": "char"}, DataTypeError),
        ({"data": [1.0, math.inf]}, DataTypeError),
        ({"data": np.ones((2, 2))}, DataTypeError),
        ({"data": "abc"}, DataTypeError),
        ({"data_type": "complex"}, DataTypeError),
        ({"epsilons": [0.1, 0.0]}, InvalidEpsilonError),
        ({"epsilons": [-1.0]}, InvalidEpsilonError),
        ({"epsilons": [math.nan]}, InvalidEpsilonError),
        ({"epsilons": [math.inf]}, InvalidEpsilonError),
        ({"epsilons": []}, InvalidEpsilonError),
    ],
)
def test_bad_input_raises_the_right_error(kwargs, error):
    call = {"data": [1.0, 2.0, 3.0], "query_type": 2, "noise_factor": 1, **kwargs}
    with pytest.raises(error):
        dp_calculate(rng=rng(), **call)


def test_binary_search_rejects_unencoded_or_missing_data():
    with pytest.raises(DataTypeError):
        binary_search_epsilon(
            ["a"], 1.0, 1, epsilons=None, is_range=False, data_type=None, rng=rng()
        )
    with pytest.raises(DataTypeError):
        binary_search_epsilon([1.0, math.nan], 1.0, 1, rng=rng())
    with pytest.raises(EmptyDataError):
        binary_search_epsilon([], 1.0, 1, rng=rng())


def test_denormal_values_do_not_break_the_noise_percent():
    res = dp_calculate([5e-324, 1.0, 2.0, 0.0], 2, 1, float, rng=rng())
    assert not any(math.isnan(s.noise_percent) for s in res.steps)
    assert_valid_trace(res.steps, DEFAULT_EPSILONS.size, res.band, res.found)


def test_large_integers_are_rounded_exactly():
    # beyond float32's exact integers the probe works in float64
    ids = 10_000_000 + np.arange(0, 2_000, 7, dtype=np.int64)
    res = dp_calculate(ids, 3, 0, int, True, rng=rng())
    assert res.found and res.dp_data.dtype == np.int64
    assert res.dp_data.min() >= ids.min() and res.dp_data.max() <= ids.max()
    assert res.noise_percent == pytest.approx(noise_percent(ids, res.dp_data), rel=1e-9)


def test_public_bounds_set_the_sensitivity_not_the_fit():
    data = [2.0, 3.0, 5.0, 6.0]
    res = dp_calculate(data, 2, 1, float, True, rng=rng(), bounds=(0.0, 10.0))
    assert res.sensitivity == pytest.approx(10.0 / 4)
    assert res.data_range == (2.0, 6.0)  # Eq. 4 still uses the data's range
    var = dp_calculate(data, 4, 1, float, rng=rng(), bounds=(0.0, 10.0))
    assert var.sensitivity == pytest.approx(100.0 / 4)
    assert var.effective_epsilon == pytest.approx(4 * var.epsilon / 10.0)
    with pytest.raises(InvalidBoundsError):
        dp_calculate(data, 2, 1, rng=rng(), bounds=(3.0, 3.0))
    with pytest.raises(DataTypeError):
        dp_calculate(["a", "b"], 3, 1, rng=rng(), bounds=(0.0, 1.0))


def test_huge_values_and_scales_do_not_overflow_into_nan():
    for data in ([1e35, -2e35, 3e35], [1e300, 2e300, -1e300]):
        res = dp_calculate(data, 2, 1, float, True, rng=rng())
        assert not any(math.isnan(s.noise_percent) for s in res.steps)
        assert_valid_trace(res.steps, DEFAULT_EPSILONS.size, res.band, res.found)


def test_epsilon_grid_is_sorted_and_deduplicated():
    res = dp_calculate(AGES, 2, 1, epsilons=[1.0, 1e-3, 0.01, 1e-3, 0.1], rng=rng())
    grid = [1e-3, 0.01, 0.1, 1.0]
    assert_valid_trace(res.steps, len(grid), res.band, res.found)
    assert all(s.epsilon == grid[s.mid_idx] for s in res.steps)
