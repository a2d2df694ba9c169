"""Auto-tune (seed 003's iterative query) stops on tolerance, on budget and on privacy."""

import pytest

from dp_engine.release.autotune import Tolerances, auto_tune
from dp_engine.release.metrics import ColumnMetrics, TableMetrics
from dp_engine.release.techniques import ColumnChoice


def _fake_run(calls):
    """Privacy Error falls as ε grows (50 / ε %); Privacy Match falls too (100 - 10ε)."""
    def run(choices):
        eps = choices[0].epsilon
        calls.append(eps)
        col = ColumnMetrics("x", "numeric", privacy_error=50.0 / eps,
                            privacy_match=100.0 - 10 * eps)
        return TableMetrics({"x": col})
    return run


CHOICES = [ColumnChoice("x", "laplace", 0.5), ColumnChoice("t", "mask")]


def test_stops_when_tolerance_met():
    calls = []
    res = auto_tune(CHOICES, _fake_run(calls), Tolerances(max_privacy_error=30), budget=10)
    # ε 0.5 -> 100 %, 1 -> 50 %, 2 -> 25 % (met)
    assert calls == [0.5, 1.0, 2.0]
    assert res.stopped == "tolerance" and res.chosen == 2
    assert res.spent == pytest.approx(3.5)
    assert [t.met for t in res.tries] == [False, False, True]


def test_stops_before_exceeding_budget():
    calls = []
    res = auto_tune(CHOICES, _fake_run(calls), Tolerances(max_privacy_error=1), budget=4)
    # 0.5 + 1 + 2 = 3.5 spent; the next try (4) would exceed what is left (0.5)
    assert calls == [0.5, 1.0, 2.0]
    assert res.stopped == "budget" and res.chosen is None
    assert res.spent == pytest.approx(3.5) and res.spent <= 4


def test_first_try_over_budget_runs_nothing():
    calls = []
    res = auto_tune(CHOICES, _fake_run(calls), Tolerances(max_privacy_error=1), budget=0.4)
    assert calls == [] and res.stopped == "budget" and res.spent == 0


def test_stops_when_privacy_tolerance_fails():
    calls = []
    res = auto_tune(CHOICES, _fake_run(calls),
                    Tolerances(max_privacy_error=10, min_privacy_match=85), budget=100)
    # ε 0.5: match 95; ε 1: 90; ε 2: 80 < 85 -> stop
    assert calls == [0.5, 1.0, 2.0] and res.stopped == "privacy"


def test_bad_budget_refused():
    with pytest.raises(ValueError):
        auto_tune(CHOICES, _fake_run([]), Tolerances(), budget=0)


def test_checks_name_the_column_behind_each_tolerance():
    import numpy as np

    m = TableMetrics({"age": ColumnMetrics("age", "numeric", privacy_error=150.0, ks=0.4,
                                           privacy_match=99.0),
                      "psa": ColumnMetrics("psa", "numeric", privacy_error=10.0, ks=0.1,
                                           privacy_match=60.0)},
                     corr_names=("age", "psa"), corr_original=np.array([[1, .5], [.5, 1]]),
                     corr_dp=np.array([[1, .1], [.1, 1]]))
    tol = Tolerances(max_privacy_error=20, max_ks=0.5, max_corr_diff=0.2,
                     min_privacy_match=90)
    got = {c.name: c for c in tol.checks(m)}
    assert list(got) == ["Error", "KS distance", "correlation difference", "Privacy Match"]
    assert got["Error"].value == pytest.approx(80) and not got["Error"].met
    assert got["Error"].column == "age"                  # the column furthest off
    assert got["KS distance"].met and got["KS distance"].column == "age"
    assert got["correlation difference"].column == "age × psa"
    assert got["correlation difference"].value == pytest.approx(0.4)
    match = got["Privacy Match"]                         # a floor: the lowest column
    assert match.minimum and match.column == "psa" and not match.met
    assert len([c for c in got.values() if not c.met]) == len(tol.utility_failures(m)) + 1
