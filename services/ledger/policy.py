"""Budget policy: ε per (role, dataset), optional per-user limits, a cap on each dataset's loss.

Configured from ``COHORT_BUDGETS`` (JSON), e.g.
``{"collaborator": 8, "third_party": 5, "renewal_days": 30,
"per_user": {"collaborator": 2}, "dataset_cap": 30}``. Defaults and their reasons:
docs/accounting.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from services.identity.roles import Role

DEFAULT_LIMITS: Mapping[Role, float | None] = MappingProxyType({
    Role.OWNER: None,
    Role.COLLABORATOR: 8.0,
    Role.THIRD_PARTY: 5.0,
})

DEFAULT_USER_LIMITS: Mapping[Role, float | None] = MappingProxyType({r: None for r in Role})
"""Per-user limits inside a role's budget: off by default (the role's budget is the bound)."""

DEFAULT_DATASET_CAP: float | None = 30.0
"""Cap on a dataset's total (dataset-level) loss; past it non-owners are refused.
Why 30: docs/accounting.md."""

_UNLIMITED_WORDS = {"", "none", "null", "unlimited", "inf", "infinity"}


def _parse_limit(role: Role | str, value: Any) -> float | None:
    """A limit from config: a non-negative finite number, or None / 'unlimited' for no limit."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _UNLIMITED_WORDS):
        return None
    try:
        limit = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"Budget for {_who(role)} must be a number or 'unlimited', got {value!r}."
        ) from None
    if math.isinf(limit) and limit > 0:
        return None
    if not math.isfinite(limit) or limit < 0:
        raise ValueError(f"Budget for {_who(role)} must be a non-negative number, got {value!r}.")
    return limit


def _who(role: Role | str) -> str:
    return f"role '{role}'" if isinstance(role, Role) else str(role)


def _role(key: Any) -> Role:
    try:
        return Role(str(key).strip().lower().replace("-", "_").replace(" ", "_"))
    except ValueError:
        known = ", ".join(r.value for r in Role)
        raise ValueError(f"Unknown role '{key}' in the budget policy; use one of: {known}.") \
            from None


def _merged(defaults: Mapping[Role, float | None], given: Mapping[Any, Any],
            what: str) -> Mapping[Role, float | None]:
    merged = dict(defaults)
    for key, value in given.items():
        role = Role(str(key))
        merged[role] = _parse_limit(role if not what else f"{what} of role '{role}'", value)
    return MappingProxyType(merged)


@dataclass(frozen=True)
class BudgetPolicy:
    """ε limit per role (None = unlimited), charged per (role, dataset); optional renewal period.

    With ``renewal_days`` set, spending restarts from zero every ``renewal_days`` days counted
    from the first charge on that (role, dataset). Note that renewal resets an accounting
    budget, not the dataset's cumulative privacy loss, which the ledger keeps separately.
    ``user_limits``: what one user of a role may spend inside the role's budget (None = no
    per-user limit, the default). ``dataset_cap``: the most dataset-level loss non-owners'
    requests may take a dataset to (None = no cap); the owner is never refused by it.
    """

    limits: Mapping[Role, float | None] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    renewal_days: int | None = None
    user_limits: Mapping[Role, float | None] = field(
        default_factory=lambda: dict(DEFAULT_USER_LIMITS))
    dataset_cap: float | None = DEFAULT_DATASET_CAP

    def __post_init__(self) -> None:
        object.__setattr__(self, "limits", _merged(DEFAULT_LIMITS, self.limits, ""))
        object.__setattr__(self, "user_limits",
                           _merged(DEFAULT_USER_LIMITS, self.user_limits, "each user"))
        object.__setattr__(self, "dataset_cap", _parse_limit("the dataset cap", self.dataset_cap))
        if self.renewal_days is not None and (
            isinstance(self.renewal_days, bool) or int(self.renewal_days) != self.renewal_days
            or self.renewal_days < 1
        ):
            raise ValueError(f"renewal_days must be a whole number ≥ 1, got {self.renewal_days!r}.")

    def limit(self, role: Role | str) -> float | None:
        """The ε limit for ``role`` on one dataset (None = unlimited)."""
        return self.limits[Role(str(role))]

    def user_limit(self, role: Role | str) -> float | None:
        """The ε one user of ``role`` may spend on one dataset (None = no per-user limit)."""
        return self.user_limits[Role(str(role))]

    @property
    def renewal(self) -> timedelta | None:
        return timedelta(days=self.renewal_days) if self.renewal_days else None

    def period_start(self, first: datetime, now: datetime) -> datetime:
        """Start of the renewal period holding ``now``, for a budget first charged at ``first``."""
        period = self.renewal
        if period is None or now < first:
            return first
        return first + ((now - first) // period) * period

    def next_renewal(self, first: datetime, now: datetime) -> datetime | None:
        period = self.renewal
        return None if period is None else self.period_start(first, now) + period

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any] | None) -> BudgetPolicy:
        """From config, e.g. ``{"collaborator": 8, "third_party": 5, "renewal_days": 30,
        "per_user": {"collaborator": 2}, "dataset_cap": 30}``.

        Role limits may also sit under a ``"limits"`` key. Missing roles keep their defaults;
        unknown keys are refused so a typo cannot silently leave a budget at its default.
        """
        d = dict(d or {})
        renewal = d.pop("renewal_days", None)
        cap = d.pop("dataset_cap", DEFAULT_DATASET_CAP)
        per_user = d.pop("per_user", None) or {}
        if not isinstance(per_user, Mapping):
            raise ValueError("'per_user' in the budget policy must map roles to limits.")
        limits = dict(d.pop("limits", {}) or {})
        limits.update(d)
        return cls(limits={_role(k): v for k, v in limits.items()},
                   renewal_days=int(renewal) if renewal not in (None, "") else None,
                   user_limits={_role(k): v for k, v in per_user.items()},
                   dataset_cap=cap)

    def with_overrides(self, overrides: Mapping[str, float | None]) -> BudgetPolicy:
        """This policy with the owner's settings from the ledger (``policy_store``) applied:
        ``budget:<role>``, ``user_limit:<role>``, ``dataset_cap`` (None: unlimited)."""
        if not overrides:
            return self
        limits, users, cap = dict(self.limits), dict(self.user_limits), self.dataset_cap
        for key, value in overrides.items():
            kind, _, role = key.partition(":")
            if kind == "budget":
                limits[_role(role)] = value
            elif kind == "user_limit":
                users[_role(role)] = value
            elif key == "dataset_cap":
                cap = value
        return BudgetPolicy(limits=limits, renewal_days=self.renewal_days, user_limits=users,
                            dataset_cap=cap)
