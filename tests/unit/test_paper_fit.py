"""Paper mode arithmetic: Eq. 4, data_range, noise %, sensitivity and effective ε."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_engine.errors import DataTypeError, InvalidBoundsError, InvalidEpsilonError
from dp_engine.paper import (
    data_range,
    effective_epsilon,
    fit_data_to_range,
    noise_percent,
    sensitivity,
)

# --- Eq. 4 on tiny hand-made arrays -------------------------------------------------------


def test_fit_float_maps_noised_extremes_onto_the_range():
    # noised min 0 -> 1, max 10 -> 3, 5 -> 2 (hand computed)
    out = fit_data_to_range([0.0, 5.0, 10.0, 2.5], [1.0, 2.0, 3.0], float)
    np.testing.assert_allclose(out, [1.0, 2.0, 3.0, 1.5])
    assert out.dtype == np.float64


def test_fit_float_negative_noise_and_unordered_range_values():
    out = fit_data_to_range([-4.0, 0.0, 4.0], [50.0, 10.0, 30.0], "float")
    np.testing.assert_allclose(out, [10.0, 30.0, 50.0])


def test_fit_constant_range_gives_the_constant():
    out = fit_data_to_range([-3.0, 0.2, 9.0], [7.0, 7.0], float)
    np.testing.assert_array_equal(out, [7.0, 7.0, 7.0])


def test_fit_noised_values_without_spread_are_clipped_not_divided_by_zero():
    np.testing.assert_array_equal(fit_data_to_range([4.0, 4.0], [1, 2, 3], float), [3.0, 3.0])
    np.testing.assert_array_equal(fit_data_to_range([2.5], [1, 2, 3], float), [2.5])
    np.testing.assert_array_equal(fit_data_to_range([-9.0], [1, 3], "int"), [1])


def test_fit_int_rounds_after_eq4():
    # (x' - 0) * 3 / 10 + 1 = [1, 1.36, 2.65, 4] -> rounded [1, 1, 3, 4]
    out = fit_data_to_range([0.0, 1.2, 5.5, 10.0], [1, 2, 3, 4], int)
    np.testing.assert_array_equal(out, [1, 1, 3, 4])
    assert out.dtype.kind == "i"


def test_fit_numeric_categories_snap_to_the_nearest_valid_value():
    # Eq. 4 onto [1, 7]: 1 + 0.6 x' = [1, 3.94, 4.6, 5.2, 7] -> nearest of {1, 3, 7}
    out = fit_data_to_range([0.0, 4.9, 6.0, 7.0, 10.0], np.array([3, 1, 7, 3]), "category")
    np.testing.assert_array_equal(out, [1, 3, 3, 7, 7])


def test_fit_text_categories_work_on_codes_of_the_sorted_labels():
    # labels sorted: chr=0, n=1, y=2; Eq. 4 onto [0, 2]: (x'+1)/3 -> [0, 0.47, 2] -> [0, 0, 2]
    out = fit_data_to_range([-1.0, 0.4, 5.0], ["n", "y", "chr"], "str")
    assert out.tolist() == ["chr", "chr", "y"]


def test_fit_bool_is_a_threshold_at_one_half():
    out = fit_data_to_range([0.2, 0.5, 0.51, -3.0, 7.0], [False, True], bool)
    assert out.dtype == bool
    assert out.tolist() == [False, False, True, False, True]


def test_fit_rejects_bad_input():
    with pytest.raises(DataTypeError):
        fit_data_to_range([], [1, 2], float)
    with pytest.raises(DataTypeError):
        fit_data_to_range([1.0, np.nan], [1, 2], float)
    with pytest.raises(DataTypeError):
        fit_data_to_range([1.0], [], float)
    with pytest.raises(DataTypeError):
        fit_data_to_range([1.0], [1, 2], "complex")


def test_data_range_is_the_sorted_unique_valid_values():
    np.testing.assert_array_equal(data_range([3, 1, None, 3, 2]), [1, 2, 3])
    assert data_range(["y", "n", "y", None]).tolist() == ["n", "y"]
    assert data_range(np.array([True, True])).tolist() == [True]
    np.testing.assert_array_equal(data_range(np.array([2.5, np.nan, -1.0])), [-1.0, 2.5])


# --- noise % ------------------------------------------------------------------------------


def test_noise_percent_relative_to_each_true_value():
    # 1/10 and 1/5 -> 10 % and 20 %, mean 15 %
    assert noise_percent([10.0, 5.0], [11.0, 4.0]) == pytest.approx(15.0)


def test_noise_percent_zero_records_use_the_column_range():
    # d = [10, range 15, 5] -> [10 %, 13.33 %, 0 %] -> mean 7.777 %
    assert noise_percent([10.0, 0.0, -5.0], [11.0, 2.0, -5.0]) == pytest.approx(70 / 9)


def test_noise_percent_all_zero_column_is_in_its_own_units():
    assert noise_percent([0.0, 0.0], [1.0, -2.0]) == pytest.approx(150.0)


def test_noise_percent_of_bools_is_the_flip_rate():
    true = [True, False, True, False]
    assert noise_percent(true, [False, False, True, True]) == pytest.approx(50.0)
    assert noise_percent(true, true) == 0.0


def test_noise_percent_of_labels_uses_codes():
    # codes a=0, b=1, c=2: b->c is 1/1 = 100 %, a->c is 2/range 2 = 100 %, c->c 0 -> 66.7 %
    assert noise_percent(["b", "a", "c"], ["c", "c", "c"]) == pytest.approx(200 / 3)
    with pytest.raises(DataTypeError):
        noise_percent(["a", "b"], ["a", "z"])


def test_noise_percent_rejects_mismatched_input():
    with pytest.raises(DataTypeError):
        noise_percent([1.0, 2.0], [1.0])
    with pytest.raises(DataTypeError):
        noise_percent([1.0, np.nan], [1.0, 2.0])


# --- sensitivity --------------------------------------------------------------------------


def test_sensitivity_of_each_query():
    data = [0.0, 10.0, 5.0, 5.0]
    assert sensitivity(1, data) == 1.0
    assert sensitivity(2, data) == pytest.approx(10 / 4)
    assert sensitivity(3, data) == pytest.approx(10 / 4)
    assert sensitivity(4, data) == pytest.approx(100 / 4)
    assert sensitivity("mean", data, bounds=(0, 20)) == pytest.approx(5.0)
    assert sensitivity("variance", data, bounds=(0, 20)) == pytest.approx(100.0)
    # missing values do not count in n
    assert sensitivity(2, [0.0, None, 10.0]) == pytest.approx(5.0)


def test_sensitivity_rejects_bad_input():
    with pytest.raises(InvalidBoundsError):
        sensitivity(2, [1.0, 2.0], bounds=(5, 5))
    with pytest.raises(InvalidBoundsError):
        sensitivity(2, [1.0, 2.0], bounds=(0, math.inf))
    with pytest.raises(DataTypeError):
        sensitivity(2, ["a", "b"])


# --- effective ε --------------------------------------------------------------------------


def test_effective_epsilon_values():
    assert effective_epsilon(2, 0.01, 920) == pytest.approx(9.2)
    assert effective_epsilon(3, 0.01, 920) == pytest.approx(9.2)
    assert effective_epsilon(1, 0.5, 100) == pytest.approx(0.5)
    assert effective_epsilon(1, 0.5, 100, statistic="histogram", span=60) == pytest.approx(30.0)
    assert effective_epsilon(4, 0.01, 100, span=20.0) == pytest.approx(0.05)
    assert effective_epsilon(4, 0.01, 100, span=0.5) == pytest.approx(2.0)
    assert effective_epsilon(4, 0.01, 100, span=0.0) == math.inf


def test_effective_epsilon_rejects_bad_input():
    with pytest.raises(InvalidBoundsError):
        effective_epsilon(4, 0.1, 10)
    with pytest.raises(InvalidBoundsError):
        effective_epsilon(1, 0.1, 10, statistic="histogram")
    for eps in (0, -1, math.nan, math.inf, "x"):
        with pytest.raises(InvalidEpsilonError):
            effective_epsilon(2, eps, 10)
    with pytest.raises(DataTypeError):
        effective_epsilon(2, 0.1, 0)
    with pytest.raises(DataTypeError):
        effective_epsilon(2, 0.1, 10, statistic="histogram")
    with pytest.raises(DataTypeError):
        effective_epsilon(1, 0.1, 10, statistic="mean")


def test_effective_epsilon_of_record_queries_ignores_the_statistic_name():
    assert effective_epsilon(3, 0.5, 10, statistic="mean") == pytest.approx(5.0)
    assert effective_epsilon(4, 0.5, 10, statistic="mean", span=2.0) == pytest.approx(2.5)


@settings(max_examples=60, deadline=None)
@given(
    noised=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30),
    range_values=st.lists(st.integers(-1000, 1000), min_size=1, max_size=8),
    kind=st.sampled_from(["float", "int", "category"]),
)
def test_fit_stays_in_range_and_keeps_the_order(noised, range_values, kind):
    out = fit_data_to_range(noised, range_values, kind).astype(float)
    lo, hi = min(range_values), max(range_values)
    assert np.all((out >= lo) & (out <= hi))
    order = np.argsort(noised, kind="stable")
    assert np.all(np.diff(out[order]) >= 0)  # Eq. 4 and rounding/snapping are monotone
    if kind == "category":
        assert set(out.tolist()) <= {float(v) for v in range_values}
    if kind == "float" and max(noised) > min(noised):
        assert out.min() == pytest.approx(lo) and out.max() == pytest.approx(hi)


def test_fit_with_a_denormal_spread_does_not_overflow():
    out = fit_data_to_range([0.0, 5e-324, 1e-320], [0.0, 10.0], float)
    assert np.all(np.isfinite(out)) and out[0] == 0.0 and out[-1] == pytest.approx(10.0)
