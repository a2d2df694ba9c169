"""Budget arithmetic the ledger's door uses: what fits a limit, what is left, refusals."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_engine.accountant import Limit, fits, remaining, require
from dp_engine.errors import BudgetExceededError


def _charge(history: list[float], epsilon: float, budget: float | None,
            what: str = "this budget") -> None:
    """Charge like the door does: ask the accountant first, record only what it allows."""
    require(epsilon, Limit(what, budget, math.fsum(history)))
    history.append(epsilon)


def test_spend_until_the_budget_is_used():
    history: list[float] = []
    for _ in range(10):
        _charge(history, 0.1, 1.0)
    spent = math.fsum(history)
    assert spent == pytest.approx(1.0) and remaining(spent, 1.0) == pytest.approx(0.0)
    with pytest.raises(BudgetExceededError,
                       match=r"histogram of age: this request needs ε = 0\.01.*spent 1 of 1, "
                             r"0 left\. Nothing was charged"):
        _charge(history, 0.01, 1.0, "histogram of age")
    assert len(history) == 10  # the refused query charged nothing


def test_float_sums_do_not_lock_out_the_last_query():
    assert 0.1 + 0.2 > 0.3 and fits(0.1, 0.2, 0.3)
    assert fits(math.fsum([0.1] * 49), 0.1, 5.0)
    assert not fits(0.1 + 0.2, 1e-6, 0.3)


def test_unlimited_budget():
    require(1e9, Limit("x", None, 1e6))
    assert fits(1e6, 1e9, None) and remaining(1e6, None) is None


def test_nothing_new_always_fits_and_remaining_is_never_negative():
    require(0.0, Limit("a lowered budget", 1.0, 2.0))
    assert fits(2.0, 0.0, 1.0) and not fits(2.0, 1e-3, 1.0)
    assert remaining(2.0, 1.0) == 0.0 and remaining(0.25, 1.0) == 0.75


def test_the_refusal_says_what_and_the_note():
    with pytest.raises(BudgetExceededError, match=r"for dataset 'd': .*spent 0\.9 of 1, 0\.1 "
                                                  r"left\..* The budget renews soon\.$"):
        require(0.5, Limit("dataset 'd'", 1.0, 0.9, " The budget renews soon."))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1e-4, 1.0), max_size=30), st.floats(0.0, 5.0))
def test_never_exceeds_the_budget(spends, budget):
    history: list[float] = []
    for eps in spends:
        before = list(history)
        if fits(math.fsum(history), eps, budget):
            _charge(history, eps, budget)
        else:
            with pytest.raises(BudgetExceededError):
                _charge(history, eps, budget)
            assert history == before
    assert math.fsum(history) <= budget * (1 + 1e-9) + 1e-9
