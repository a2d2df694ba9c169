"""Privacy-budget arithmetic: the ONE place that decides whether a charge fits a limit.

Pure (no I/O): the SQL ledger in services/ledger reads spend under its locks and asks this
module. Sequential composition (releases on the same records add their ε) and parallel
composition (disjoint records cost the max ε) are decided by the ledger, which passes the
resulting charge here.
"""

from __future__ import annotations

from dataclasses import dataclass

from dp_engine.errors import BudgetExceededError

TOLERANCE = 1e-9
"""Relative slack (of the limit, or of 1 for limits below 1) when comparing a float sum of
charges to a limit, so 50 charges of 0.1 fit a budget of 5 and 0.1 + 0.2 fits 0.3."""


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
