"""Accountant: sequential and parallel composition, refusals that charge nothing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_engine.accountant import Accountant
from dp_engine.errors import BudgetExceededError, InvalidEpsilonError


def test_spend_until_the_budget_is_used():
    acc = Accountant(1.0)
    for _ in range(10):
        acc.spend(0.1, label="count")
    assert acc.spent == pytest.approx(1.0) and acc.remaining == pytest.approx(0.0)
    with pytest.raises(BudgetExceededError, match=r"needs ε = 0\.01.*spent 1 of 1, 0 left"):
        acc.spend(0.01, label="histogram of age")
    assert acc.spent == pytest.approx(1.0)  # the refused query charged nothing
    assert len(acc.history) == 10


def test_float_sums_do_not_lock_out_the_last_query():
    acc = Accountant(0.3)
    acc.spend(0.1)
    acc.spend(0.2)  # 0.1 + 0.2 > 0.3 in binary floating point
    assert not acc.can_spend(1e-6)


def test_unlimited_budget():
    acc = Accountant(None)
    acc.spend(1e6)
    assert acc.can_spend(1e9) and acc.remaining == math.inf and acc.spent == 1e6


def test_composition_rules():
    assert Accountant.sequential([0.1, 0.2, 0.3]) == pytest.approx(0.6)
    assert Accountant.parallel([0.1, 0.5, 0.3]) == 0.5
    assert Accountant.parallel([]) == 0.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1e-4, 1.0), max_size=30), st.floats(0.0, 5.0))
def test_never_exceeds_the_budget(spends, budget):
    acc = Accountant(budget)
    for eps in spends:
        before = acc.spent
        if acc.can_spend(eps):
            acc.spend(eps)
        else:
            with pytest.raises(BudgetExceededError):
                acc.spend(eps)
            assert acc.spent == before
    assert acc.spent <= budget * (1 + 1e-9) + 1e-9


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "x"])
def test_bad_epsilons(bad):
    with pytest.raises(InvalidEpsilonError):
        Accountant(1.0).spend(bad)
    with pytest.raises(InvalidEpsilonError):
        Accountant.sequential([0.1, bad])


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf])
def test_bad_budgets(bad):
    with pytest.raises(InvalidEpsilonError, match="budget"):
        Accountant(bad)
