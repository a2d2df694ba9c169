"""Budget policy: how much ε each role may spend per dataset, and how often that renews."""

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
    Role.COLLABORATOR: 5.0,
    Role.THIRD_PARTY: 1.0,
})

_UNLIMITED_WORDS = {"", "none", "null", "unlimited", "inf", "infinity"}


def _parse_limit(role: Role, value: Any) -> float | None:
    """A limit from config: a non-negative finite number, or None / 'unlimited' for no limit."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _UNLIMITED_WORDS):
        return None
    try:
        limit = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"Budget for role '{role}' must be a number or 'unlimited', got {value!r}."
        ) from None
    if math.isinf(limit) and limit > 0:
        return None
    if not math.isfinite(limit) or limit < 0:
        raise ValueError(f"Budget for role '{role}' must be a non-negative number, got {value!r}.")
    return limit


@dataclass(frozen=True)
class BudgetPolicy:
    """ε limit per role (None = unlimited), charged per (role, dataset); optional renewal period.

    With ``renewal_days`` set, spending restarts from zero every ``renewal_days`` days counted
    from the first charge on that (role, dataset). Note that renewal resets an accounting
    budget, not the dataset's cumulative privacy loss, which the ledger keeps separately.
    """

    limits: Mapping[Role, float | None] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    renewal_days: int | None = None

    def __post_init__(self) -> None:
        merged = dict(DEFAULT_LIMITS)
        for key, value in self.limits.items():
            role = Role(str(key))
            merged[role] = _parse_limit(role, value)
        object.__setattr__(self, "limits", MappingProxyType(merged))
        if self.renewal_days is not None and (
            isinstance(self.renewal_days, bool) or int(self.renewal_days) != self.renewal_days
            or self.renewal_days < 1
        ):
            raise ValueError(f"renewal_days must be a whole number ≥ 1, got {self.renewal_days!r}.")

    def limit(self, role: Role | str) -> float | None:
        """The ε limit for ``role`` on one dataset (None = unlimited)."""
        return self.limits[Role(str(role))]

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
        """From config, e.g. ``{"collaborator": 5, "third_party": 1, "renewal_days": 30}``.

        Role limits may also sit under a ``"limits"`` key. Missing roles keep their defaults;
        unknown keys are refused so a typo cannot silently leave a budget at its default.
        """
        d = dict(d or {})
        renewal = d.pop("renewal_days", None)
        limits = dict(d.pop("limits", {}) or {})
        limits.update(d)
        parsed: dict[Role, float | None] = {}
        for key, value in limits.items():
            try:
                role = Role(str(key).strip().lower().replace("-", "_").replace(" ", "_"))
            except ValueError:
                known = ", ".join(r.value for r in Role)
                raise ValueError(
                    f"Unknown role '{key}' in the budget policy; use one of: {known}."
                ) from None
            parsed[role] = value
        return cls(limits=parsed, renewal_days=int(renewal) if renewal not in (None, "") else None)
