"""Privacy-budget arithmetic: the ONE place that decides whether a charge fits a limit.

Pure (no I/O): the SQL ledger in services/ledger reads spend under its locks and asks this
module; the in-memory ``Accountant`` (for scripts and tests) uses the same rule. Sequential
composition: releases on the same records add their ε. Parallel composition: releases on
disjoint records (e.g. one per group) cost the max ε.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dp_engine.errors import BudgetExceededError, InvalidEpsilonError

TOLERANCE = 1e-9
"""Relative slack (of the limit, or of 1 for limits below 1) when comparing a float sum of
charges to a limit, so 50 charges of 0.1 fit a budget of 5 and 0.1 + 0.2 fits 0.3."""


def check_epsilon(epsilon: object) -> float:
    """ε of one release: a finite number > 0 (the sound engine's rule, imported on use so the
    ledger's worker processes do not load numpy and scipy for it)."""
    from dp_engine.sound.validation import check_epsilon as check

    return check(epsilon)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def fits(spent: float, epsilon: float, limit: float | None) -> bool:
    """Does a charge of ``epsilon`` fit a limit (None = unlimited) with ``spent`` used?

    A charge of 0 (nothing new released) always fits, even past a limit lowered since.
    """
    if limit is None or epsilon <= 0:
        return True
    return spent + epsilon <= limit + TOLERANCE * max(limit, 1.0)


def remaining(spent: float, limit: float | None) -> float | None:
    """What is left under ``limit`` (None = unlimited), never negative."""
    return None if limit is None else max(limit - spent, 0.0)


@dataclass(frozen=True)
class Limit:
    """One limit a charge must fit: what it is (for the message), its cap and its spend.

    ``what`` completes "Privacy budget exhausted for ...", e.g. "the collaborator role on
    dataset 'pirads'"; ``note`` is appended to the refusal (e.g. when the budget renews).
    """

    what: str
    limit: float | None
    spent: float
    note: str = ""

    @property
    def remaining(self) -> float | None:
        return remaining(self.spent, self.limit)


def require(epsilon: float, limit: Limit) -> None:
    """Raise BudgetExceededError (a message a user can act on) unless ``epsilon`` fits."""
    if fits(limit.spent, epsilon, limit.limit):
        return
    assert limit.limit is not None
    left = remaining(limit.spent, limit.limit)
    raise BudgetExceededError(
        f"Privacy budget exhausted for {limit.what}: this request needs ε = {_fmt(epsilon)}, "
        f"but the budget has spent {_fmt(limit.spent)} of {_fmt(limit.limit)}, "
        f"{_fmt(left or 0.0)} left. Nothing was charged and no answer was released. "
        f"Previously released answers stay available at no cost.{limit.note}"
    )


def _nonneg(value: object, name: str) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidEpsilonError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(x) or x < 0:
        raise InvalidEpsilonError(f"{name} must be a finite number ≥ 0, got {value!r}.")
    return x


class Accountant:
    """A budget (None = unlimited) and the ε charged against it so far, in memory."""

    def __init__(self, budget: float | None) -> None:
        if budget is not None:
            try:
                budget = _nonneg(budget, "A privacy budget")
            except InvalidEpsilonError:
                raise InvalidEpsilonError(
                    f"A privacy budget must be a finite number ≥ 0 or unlimited (got {budget!r})."
                ) from None
        self.budget = budget
        self.history: list[tuple[str, float]] = []

    @property
    def spent(self) -> float:
        return math.fsum(eps for _, eps in self.history)

    @property
    def remaining(self) -> float:
        left = remaining(self.spent, self.budget)
        return math.inf if left is None else left

    def can_spend(self, epsilon: float) -> bool:
        return fits(self.spent, check_epsilon(epsilon), self.budget)

    def spend(self, epsilon: float, *, label: str = "") -> None:
        """Charge ε, or raise BudgetExceededError and charge nothing."""
        eps = check_epsilon(epsilon)
        require(eps, Limit(label or "this budget", self.budget, self.spent))
        self.history.append((label, eps))

    @staticmethod
    def sequential(epsilons: Iterable[float]) -> float:
        """Total ε of releases on the same records: the sum."""
        return math.fsum(check_epsilon(e) for e in epsilons)

    @staticmethod
    def parallel(epsilons: Iterable[float]) -> float:
        """Total ε of releases on disjoint records: the largest (0 for none)."""
        return max((check_epsilon(e) for e in epsilons), default=0.0)
