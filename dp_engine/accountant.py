"""Privacy-budget arithmetic (pure: no I/O; the SQL ledger lives in services/).

Sequential composition: releases on the same records add their ε. Parallel
composition: releases on disjoint records (e.g. one per group) cost the max ε.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from dp_engine.errors import BudgetExceededError, InvalidEpsilonError
from dp_engine.sound.validation import check_epsilon

_SLACK = 1e-12  # relative tolerance so 0.1 + 0.2 fits a budget of 0.3


class Accountant:
    """A budget (None = unlimited) and the ε charged against it so far."""

    def __init__(self, budget: float | None) -> None:
        if budget is not None:
            value = float(budget)
            if not math.isfinite(value) or value < 0:
                raise InvalidEpsilonError(
                    f"A privacy budget must be a finite number ≥ 0 or unlimited (got {budget!r})."
                )
            budget = value
        self.budget = budget
        self.history: list[tuple[str, float]] = []

    @property
    def spent(self) -> float:
        return math.fsum(eps for _, eps in self.history)

    @property
    def remaining(self) -> float:
        return math.inf if self.budget is None else max(self.budget - self.spent, 0.0)

    def can_spend(self, epsilon: float) -> bool:
        eps = check_epsilon(epsilon)
        if self.budget is None:
            return True
        return self.spent + eps <= self.budget * (1 + _SLACK) + _SLACK

    def spend(self, epsilon: float, *, label: str = "") -> None:
        """Charge ε, or raise BudgetExceededError and charge nothing."""
        eps = check_epsilon(epsilon)
        if not self.can_spend(eps):
            what = f" for {label}" if label else ""
            raise BudgetExceededError(
                f"This query{what} needs ε = {eps:.3g}, but only {self.remaining:.3g} of the "
                f"budget {self.budget:.3g} is left ({self.spent:.3g} spent). Ask the data "
                "owner for more budget or reuse an earlier answer."
            )
        self.history.append((label, eps))

    @staticmethod
    def sequential(epsilons: Iterable[float]) -> float:
        """Total ε of releases on the same records: the sum."""
        return math.fsum(check_epsilon(e) for e in epsilons)

    @staticmethod
    def parallel(epsilons: Iterable[float]) -> float:
        """Total ε of releases on disjoint records: the largest (0 for none)."""
        return max((check_epsilon(e) for e in epsilons), default=0.0)
