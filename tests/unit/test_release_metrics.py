"""The studio's metrics against examples worked by hand from seed 003's definitions
(rows of its Tables 1.1 and 1.2)."""

import math

import numpy as np
import pandas as pd
import pytest

from dp_engine.release.metrics import (
    categorical_metrics,
    digimatch,
    numeric_metrics,
    privacy_error,
    privacy_match,
    table_metrics,
)

PREMIUM = [600, 442.8, 210]          # Annual_Premium, Table 1.1 rows 1-3
PREMIUM_DP = [1047, 479, 42]         # Table 1.2


def test_privacy_match_counts_equal_cells():
    # Sales_Channel, rows 1-10: 6 of 10 cells equal -> (1 - 6/10) * 100
    orig = ["BP", "IFA", "IFA", "IFA", "BP", "IFA", "BP", "IFA", "IFA", "BP"]
    dp = ["BP", "IFA", "IFA", "BP", "IFA", "IFA", "BP", "IFA", "BP", "IFA"]
    assert privacy_match(orig, dp) == pytest.approx(40.0)
    # Gender: 8 of 10 equal
    g = list("FFMMMFMMMM")
    g_dp = list("FFMFMFFMMM")
    assert privacy_match(g, g_dp) == pytest.approx(20.0)


def test_privacy_match_ignores_missing_originals_and_rounds_numbers():
    assert privacy_match([1.0, None, 3.0], [1.2, 5.0, 4.0], decimals=0) == pytest.approx(50.0)
    assert math.isnan(privacy_match([None, None], [1, 2]))


def test_digimatch_by_hand():
    # 600 vs 1047: the 3 leading digits 600 / 104 differ in 2 -> 66.7 %
    # 443 vs 479: 4=4, 4!=7, 3!=9 -> 66.7 %; 210 vs 42: 21 / 42 differ in 2 of 2 -> 100 %
    assert digimatch(PREMIUM, PREMIUM_DP) == pytest.approx((200 / 3 + 200 / 3 + 100) / 3)
    # Sum_Assured row 1: 65038 vs 65938 -> 1 of 5 digits
    assert digimatch([65038], [65938]) == pytest.approx(20.0)
    assert digimatch([12.34], [12.35], decimals=2) == pytest.approx(25.0)
    assert digimatch([7], [7]) == 0.0


def test_privacy_error_by_hand():
    expected = (447 / 600 + 36.2 / 442.8 + 168 / 210) / 3 * 100
    assert privacy_error(PREMIUM, PREMIUM_DP) == pytest.approx(expected)
    assert privacy_error([65038], [65938]) == pytest.approx(900 / 65038 * 100)
    # a zero original has no relative error: left out
    assert privacy_error([0, 10], [5, 11]) == pytest.approx(10.0)


def test_numeric_utility_metrics_match_scipy_definitions():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([2.0, 3.0, 4.0, 5.0])
    m = numeric_metrics("x", x, y)
    assert m.mean_original == 2.5 and m.mean_dp == 3.5
    assert m.std_original == pytest.approx(np.std(x, ddof=1))
    assert m.wasserstein == pytest.approx(1.0)       # every mass moved by 1
    assert m.ks == pytest.approx(0.25)               # largest CDF gap: one of four points


def test_categorical_shares_and_total_variation():
    m = categorical_metrics("c", ["a", "a", "b", "b"], ["a", "b", "b", "b"], ["a", "b", "c"])
    assert m.shares_original == {"a": 0.5, "b": 0.5, "c": 0.0}
    assert m.shares_dp == {"a": 0.25, "b": 0.75, "c": 0.0}
    assert m.total_variation == pytest.approx(0.25)
    assert m.privacy_match == pytest.approx(25.0)


def test_correlation_difference():
    orig = pd.DataFrame({"a": [1, 2, 3, 4.0], "b": [1, 2, 3, 4.0]})
    dp = pd.DataFrame({"a": [1, 2, 3, 4.0], "b": [4, 3, 2, 1.0]})
    m = table_metrics(orig, dp, {"a": "numeric", "b": "numeric"})
    assert m.corr_max_diff == pytest.approx(2.0)      # +1 became -1
    assert m.corr_original[0, 1] == pytest.approx(1.0)
    assert m.overall("privacy_match") == pytest.approx(50.0)   # 0 % and 100 %


def test_cdf_distances_equal_scipy():
    from scipy import stats

    from dp_engine.release.metrics import cdf_distances

    rng = np.random.default_rng(4)
    x, y = rng.normal(size=3001), np.round(rng.normal(0.3, 2, size=1999), 1)
    w1, ks = cdf_distances(x, y)
    assert w1 == pytest.approx(stats.wasserstein_distance(x, y), rel=1e-9)
    assert ks == pytest.approx(stats.ks_2samp(x, y).statistic, rel=1e-12)


def test_digit_counts_at_powers_of_ten():
    from dp_engine.release.metrics import _digits

    x = np.array([0, 1, 9, 10, 99, 100, 999, 1000, 10**15 - 1, 10**15, 10**18 - 1])
    assert _digits(x).tolist() == [1, 1, 1, 2, 2, 3, 3, 4, 15, 16, 18]


def _digimatch_by_strings(a, b, decimals=0):
    """The definition read literally: compare the leading digits as text, row by row."""
    out = []
    for x, y in zip(a, b, strict=True):
        sx = str(int(round(abs(x) * 10 ** decimals)))
        sy = str(int(round(abs(y) * 10 ** decimals)))
        m = min(len(sx), len(sy))
        out.append(100 * sum(c != d for c, d in zip(sx[:m], sy[:m], strict=True)) / m)
    return float(np.mean(out))


@pytest.mark.parametrize("scale", [100, 1e6, 1e9])
def test_digimatch_equals_the_string_definition_on_random_rows(scale):
    rng = np.random.default_rng(int(scale) % 97)
    a = rng.uniform(-scale, scale, 3000)
    b = a * rng.uniform(0.01, 100, 3000)          # lengths differ on many rows
    from dp_engine.release.metrics import digimatch

    assert digimatch(a, b) == pytest.approx(_digimatch_by_strings(a, b), abs=1e-9)
    r = np.round(rng.uniform(0, 100, 3000), 1)
    s = np.round(r + rng.normal(0, 5, 3000), 1)
    assert digimatch(r, s, decimals=1) == pytest.approx(_digimatch_by_strings(r, s, 1),
                                                        abs=1e-9)


@pytest.mark.parametrize("values,categories,expected", [
    (np.array([1, 2, 7]), (1, 2, 3), [0, 1, -1]),
    (np.array([1.0, np.nan, 3.0]), (1, 2, 3), [0, -1, 2]),
    (np.array([True, False]), (False, True), [1, 0]),
    (np.array([1, 0]), (False, True), [1, 0]),                      # 1 == True, as before
    (pd.Categorical(["b", None, "z"], categories=["a", "b", "z"]), ("a", "b"), [1, -1, -1]),
    (pd.Categorical(["1", "2"]), (1, 2), [0, 1]),                   # text against numbers
    (np.array(["2", "x"], dtype=object), (1, 2), [1, -1]),
])
def test_category_codes_by_kind(values, categories, expected):
    from dp_engine.release.metrics import category_codes

    assert category_codes(values, categories).tolist() == expected
