"""grouped_statistic: the per-group computations behind the paper's Figures 2–4."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_engine.errors import DataTypeError, EmptyDataError, UnknownCategoryError
from dp_engine.paper import grouped_statistic

_GEN = np.random.default_rng(99)
N = 300
AGES = _GEN.normal(65.0, 8.0, N).round(1)
PIRADS = _GEN.integers(1, 6, N)
PROSTATITIS = _GEN.choice(
    ["n", "chr", "y", "acute", "acute on chronic"], N, p=[0.6, 0.15, 0.1, 0.1, 0.05]
)
HUGE_EPS = [1e9]  # noise so small that rounded results equal the raw ones


def rng(seed: int = 4) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("noise_factor", [0, 1, 2])
def test_figure3_mean_of_noised_ages_per_true_group(noise_factor):
    res = grouped_statistic(AGES, PIRADS, 2, noise_factor, data_type=float, rng=rng())
    assert res.group_keys == (1, 2, 3, 4, 5)
    noised = np.asarray(res.value_result.dp_data)
    for i, key in enumerate(res.group_keys):
        members = key == PIRADS
        assert res.counts[i] == members.sum()
        assert res.values[i] == pytest.approx(noised[members].mean(), rel=1e-12)
    assert res.q1 is None and res.q3 is None and res.median is None
    assert res.group_result is None
    assert res.value_result.found and res.epsilon == res.value_result.epsilon
    assert res.effective_epsilon == pytest.approx(N * res.epsilon)
    assert np.all((noised >= AGES.min() - 1e-9) & (noised <= AGES.max() + 1e-9))  # is_range


@pytest.mark.parametrize("noise_factor", [0, 1, 2])
def test_figure4_median_per_noisy_category_with_quartiles(noise_factor):
    order = ["n", "chr", "y", "acute", "acute on chronic"]
    res = grouped_statistic(
        AGES,
        PROSTATITIS,
        3,
        noise_factor,
        data_type=int,
        noise_groups=True,
        group_categories=order,
        rng=rng(),
    )
    assert res.group_keys == tuple(order)
    assert res.group_result is not None and res.group_result.data_range == tuple(order)
    labels = np.asarray(res.group_result.dp_data)
    ages = np.asarray(res.value_result.dp_data)
    assert set(labels) <= set(order) and ages.dtype.kind == "i"
    assert res.counts.sum() == N
    for i, key in enumerate(order):
        members = labels == key
        assert res.counts[i] == members.sum()
        if members.any():
            q1, med, q3 = np.quantile(ages[members], [0.25, 0.5, 0.75])
            assert (res.q1[i], res.values[i], res.q3[i]) == pytest.approx((q1, med, q3))
            assert res.q1[i] <= res.median[i] <= res.q3[i]
        else:
            assert math.isnan(res.values[i]) and res.counts[i] == 0
    total = res.value_result.effective_epsilon + res.group_result.effective_epsilon
    assert res.effective_epsilon == pytest.approx(total)


def test_figure4_without_noise_recovers_the_true_groups():
    res = grouped_statistic(
        AGES, PROSTATITIS, 3, 0, noise_groups=True, epsilons=HUGE_EPS, rng=rng()
    )
    assert np.array_equal(np.asarray(res.group_result.dp_data), PROSTATITIS)
    for i, key in enumerate(res.group_keys):
        assert res.values[i] == pytest.approx(np.median(AGES[key == PROSTATITIS]), abs=1e-3)


def test_figure2_counts_per_cell_are_computed_raw_then_noised():
    ages = np.rint(AGES).astype(int)
    res = grouped_statistic(ages, PIRADS, 1, 0, data_type=int, epsilons=HUGE_EPS, rng=rng())
    cells = {}
    for a, p in zip(ages.tolist(), PIRADS.tolist(), strict=True):
        cells[(a, p)] = cells.get((a, p), 0) + 1
    assert res.group_keys == tuple(sorted(cells))
    assert res.values.tolist() == [cells[k] for k in res.group_keys]  # noise ~1e-9, rounded
    assert np.array_equal(res.counts, res.values)
    assert res.effective_epsilon == res.epsilon  # one patient moves one count by 1


@pytest.mark.parametrize("noise_factor", [0, 1, 2])
def test_figure2_noised_counts_are_ints_in_the_raw_count_range(noise_factor):
    ages = np.rint(AGES).astype(int)
    res = grouped_statistic(ages, PIRADS, 1, noise_factor, data_type=int, rng=rng())
    counts = np.asarray(res.value_result.dp_data)
    lo, hi = res.value_result.data_range
    assert counts.dtype.kind == "i" and counts.min() >= lo and counts.max() <= hi
    assert res.value_result.found


def test_histogram_without_groups_and_one_group_statistics():
    res = grouped_statistic([1, 1, 2, 5, 5, 5], None, 1, 0, epsilons=HUGE_EPS, rng=rng())
    assert res.group_keys == (1, 2, 5) and res.values.tolist() == [2, 1, 3]
    one = grouped_statistic(AGES, None, 2, 1, rng=rng())
    assert one.group_keys == ("all",)
    assert one.values[0] == pytest.approx(np.mean(one.value_result.dp_data))


def test_variance_per_group_is_the_population_variance_of_noised_values():
    res = grouped_statistic(AGES, PIRADS, 4, 1, rng=rng())
    noised = np.asarray(res.value_result.dp_data)
    for i, key in enumerate(res.group_keys):
        assert res.values[i] == pytest.approx(noised[key == PIRADS].var(), rel=1e-9)


def test_rows_missing_a_value_or_group_are_dropped_and_counted():
    values = [60.0, None, 70.0, 65.0, math.nan, 80.0]
    groups = ["a", "b", None, "a", "b", "b"]
    res = grouped_statistic(values, groups, 2, 0, epsilons=HUGE_EPS, rng=rng())
    assert res.n_dropped == 3
    assert res.group_keys == ("a", "b")
    assert res.counts.tolist() == [2, 1]
    assert res.values == pytest.approx([62.5, 80.0], abs=1e-3)


def test_listed_category_without_records_is_nan_with_zero_count():
    res = grouped_statistic(
        [1.0, 2.0, 3.0],
        ["a", "a", "b"],
        2,
        0,
        group_categories=["a", "b", "c"],
        epsilons=HUGE_EPS,
        rng=rng(),
    )
    assert res.counts.tolist() == [2, 1, 0] and math.isnan(res.values[2])


def test_grouped_bad_input():
    with pytest.raises(DataTypeError):
        grouped_statistic([1.0, 2.0], ["a"], 2, 0, rng=rng())
    with pytest.raises(DataTypeError):
        grouped_statistic([1.0, 2.0], ["a", "b"], 1, 0, noise_groups=True, rng=rng())
    with pytest.raises(EmptyDataError):
        grouped_statistic([None, 1.0], ["a", None], 2, 0, rng=rng())
    with pytest.raises(UnknownCategoryError):
        grouped_statistic([1.0, 2.0], ["a", "z"], 2, 0, group_categories=["a"], rng=rng())
    with pytest.raises(DataTypeError):
        grouped_statistic(["x", "y"], ["a", "b"], 2, 0, rng=rng())
