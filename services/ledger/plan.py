"""What the ledger's door needs to know about a release, decided from public metadata only.

A ``ReleasePlan`` says which answer is asked for (dataset version, canonical query, tier, the
role that pays), the ε of every tier (one number, or one per group: groups are disjoint, so a
tier costs the maximum), whether the tiers nest (a noisier tier is a less noisy one plus noise),
the mechanism and whether it is differentially private at all (paper mode is not). From it and
what the ledger already holds follow what the role pays (``cost``) and how much the
dataset-level loss grows (``loss_growth``), without reading a row or spending anything.

A plan may be built from internal releases (``InternalSpec``: e.g. the DP size n̂ of a dataset
version), which the door looks up, or releases once and stores, before building it
(``PlanSource``). The data is reached only through a ``Compute`` callable: given ε (per tier or
group) and an rng it returns a dp_engine ``Release``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from services.identity.roles import Role

if TYPE_CHECKING:
    import numpy as np

    from dp_engine.sound.release import Release

Epsilon = float | tuple[float, ...]
"""ε of one tier: one number, or one per group (parallel composition: it costs the maximum)."""
Compute = Callable[["Epsilon | None", "np.random.Generator"], "Release"]
"""The data seam: the release at ε (None when the mechanism picks its own, paper mode)."""
Join = Callable[["Mapping[int, Release]", int, "tuple[float, ...]", "Compute",
                 "np.random.Generator"], "Release"]
"""A new tier of a query joined to its stored tiers (tier → release): refined, sharpened,
bridged or fresh, so the chain keeps its nested law (services/ledger/chain.py, the default)."""
Publish = Callable[["ReleasePlan", "Release"], Mapping[str, Any]]
"""The public answer (JSON-able) the paying role is given, from the tier's release."""
RngFactory = Callable[[], "np.random.Generator"]

TIERS = (0, 1, 2)
INTERNAL_PREFIX = "internal:"


def epsilon_max(value: Epsilon | None) -> float:
    """The cost of one tier's ε: the largest group ε (NaN when not known in advance)."""
    if value is None:
        return math.nan
    if isinstance(value, tuple):
        return max(value, default=0.0)
    return float(value)


def _checked(value: Any) -> Epsilon | None:
    """ε as stored in a plan: None, a float, or a tuple of floats (one per group)."""
    if value is None:
        return None
    many = isinstance(value, list | tuple) or hasattr(value, "tolist")
    items = tuple(float(v) for v in (list(value) if many else [value]))
    if not items or not all(math.isfinite(v) and v >= 0 for v in items):
        raise ValueError(f"ε must be finite numbers ≥ 0 (one per group), got {value!r}.")
    return items if many else items[0]


def _as_tuple(value: Epsilon) -> tuple[float, ...]:
    return value if isinstance(value, tuple) else (value,)


def _nested_ok(upper: Epsilon | None, lower: Epsilon | None) -> bool:
    """A noisier tier's ε may not exceed the less noisy tier's, per group shown at both (a
    group may be shown at one tier and withheld, ε 0, at the other)."""
    if upper is None or lower is None:
        return True
    a, b = _as_tuple(upper), _as_tuple(lower)
    a, b = (a * len(b) if len(a) == 1 else a), (b * len(a) if len(b) == 1 else b)
    return len(a) == len(b) and all(x >= y for x, y in zip(a, b, strict=True)
                                    if x > 0 and y > 0)


@dataclass(frozen=True)
class ReleaseKey:
    """Which answer: one per (dataset version, canonical query, tier) for the paying role."""

    dataset_id: str
    dataset_version: str
    query_key: str       # the canonical query, the same for every role (the tier store's key)
    tier: int            # the noise factor of the tier served
    payer: Role          # the granted role: its budget pays, its users share this copy

    @property
    def served_key(self) -> str:
        """The cache key of the paying role's served copy."""
        return f"{self.query_key}|as={Role(self.payer).value}"


@dataclass(frozen=True)
class InternalSpec:
    """A calibration release a plan is built from (e.g. the DP size n̂, a grouping's sizes).

    Released once per dataset version, stored in the tier store and public from then on
    (disclosed: it adds its ε to the dataset's loss). ``priced``: drawn when a request first
    needs it and charged to that request's paying role (a grouping's DP sizes); otherwise part
    of the dataset's reserved calibration slice, charged to no role. ``key`` is unique within
    a dataset version (e.g. ``"sizes:"``).
    """

    key: str
    epsilon: float
    mechanism: str
    compute: Compute = field(compare=False)
    priced: bool = False
    title: str = ""

    @property
    def store_key(self) -> str:
        return INTERNAL_PREFIX + self.key


class PlanSource(Protocol):
    """What the door accepts: a key, the internal releases needed, and a pure builder."""

    @property
    def key(self) -> ReleaseKey: ...

    @property
    def inputs(self) -> Sequence[InternalSpec]: ...

    def build(self, inputs: Mapping[str, Release]) -> ReleasePlan: ...


@dataclass(frozen=True)
class ReleasePlan:
    """A priced release: ε per tier, nesting, mechanism, DP or not (public metadata only).

    ``info`` carries whatever the plan's builder wants back when publishing (e.g. the
    calibration of each tier); the ledger does not read it.
    """

    key: ReleaseKey
    epsilons: Mapping[int, Epsilon | None]
    nestable: bool
    mechanism: str
    dp: bool = True
    join: Join | None = field(default=None, compare=False)
    info: Mapping[str, Any] = field(default_factory=dict, compare=False)
    leaves: bool = False
    """Always a disclosure, whoever pays (a synthetic table made to leave the hospital)."""

    def __post_init__(self) -> None:
        eps = {int(t): _checked(v) for t, v in self.epsilons.items()}
        if self.key.tier not in eps:
            raise ValueError(f"The plan has no ε for the tier it serves ({self.key.tier}).")
        if self.dp and any(eps.get(t) is None for t in self.chain):
            raise ValueError("A differentially private plan needs ε for every tier it draws.")
        if self.nestable:
            if any(t not in eps for t in range(self.key.tier + 1)):
                raise ValueError("Nested tiers need ε for every tier down to the one served.")
            for t in range(1, self.key.tier + 1):
                if not _nested_ok(eps[t - 1], eps[t]):
                    raise ValueError(f"Nested tiers need ε{t - 1} ≥ ε{t}.")
        object.__setattr__(self, "epsilons", eps)

    # -- PlanSource for a plan that needs no internal release -------------------------------
    @property
    def inputs(self) -> Sequence[InternalSpec]:
        return ()

    def build(self, inputs: Mapping[str, Release]) -> ReleasePlan:
        return self

    # -- pricing -----------------------------------------------------------------------------
    @property
    def chain(self) -> tuple[int, ...]:
        """Tiers drawn or refined to serve ``key.tier``: 0..tier when nested, else the tier."""
        return tuple(range(self.key.tier + 1)) if self.nestable else (self.key.tier,)

    def epsilon(self, tier: int | None = None) -> float:
        """The ε (max over groups) of ``tier``, by default the tier served."""
        return epsilon_max(self.epsilons[self.key.tier if tier is None else tier])

    @property
    def cost(self) -> float:
        """What the paying role is charged: the served tier's ε; 0 when not DP (paper mode:
        recorded with its effective ε as a lower bound, outside every sound-mode total)."""
        return self.epsilon() if self.dp else 0.0

    def discloses(self) -> bool:
        """Whether serving this plan's tier is a disclosure (its payer is not the owner, or
        it is a table made to leave): only disclosures count towards the dataset's loss."""
        return self.dp and (self.leaves or Role(self.key.payer) is not Role.OWNER)
