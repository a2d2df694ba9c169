"""One query's stored tiers: how a new tier is drawn, and what the dataset's loss becomes.

The tiers of one query (dataset version, canonical query) are drawn lazily, in whatever order
roles ask, and always form one nested chain per group (``dp_engine.sound.gradual``): a new
tier is refined from the nearest less noisy stored tier, sharpened from the nearest noisier
one, bridged between the two, or drawn afresh, group by group. So the chain reveals what its
least noisy tier reveals.

A tier counts towards the dataset's loss only once it is *disclosed*: served to a role other
than the owner (the owner holds the data: its own views are not a disclosure), put on a
published page, or drawn for a release that always leaves the hospital (a synthetic copy).
Under parallel composition over the groups, a query's loss is the largest ε of any disclosed
tier of any group; disclosing a tier grows it by at most that tier's own largest group ε —
what the paying role is charged for it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dp_engine.sound import gradual
from dp_engine.sound.release import Release

FRESH, REFINED, SHARPENED, BRIDGED = "fresh", "refined", "sharpened", "bridged"
INDEPENDENT = "independent"
"""A tier of a query that is not a chain (paper mode, a studio run): each one disclosed adds
its own ε."""


def group_eps(value: Any) -> tuple[float, ...]:
    """ε per group as a plan states it: one number or one per group; 0 or NaN: withheld."""
    if value is None:
        return ()
    items = list(value) if isinstance(value, list | tuple) else [value]
    floats = (math.nan if v is None else float(v) for v in items)
    return tuple(f if math.isfinite(f) and f > 0 else 0.0 for f in floats)


def eps_json(value: Any) -> str:
    """The per-group ε column of a stored tier."""
    return json.dumps(list(group_eps(value)))


@dataclass
class StoredTier:
    """One stored tier of a query; its payload is decoded only when a draw needs it."""

    tier: int
    epsilons: tuple[float, ...]          # per group, 0 = withheld at this tier
    disclosed: bool
    dp: bool = True
    payload: str = field(default="", repr=False)
    _release: Release | None = field(default=None, repr=False)

    def release(self) -> Release:
        if self._release is None:
            self._release = Release.from_dict(json.loads(self.payload))
        return self._release


def query_loss(tiers: Mapping[int, StoredTier]) -> float:
    """The largest ε of any group in any disclosed DP tier (0: nothing disclosed)."""
    return max((max(t.epsilons, default=0.0) for t in tiers.values()
                if t.disclosed and t.dp), default=0.0)


def disclosure_growth(tiers: Mapping[int, StoredTier], epsilons: tuple[float, ...]) -> float:
    """How much the query's loss grows when a tier with these ε is disclosed."""
    return max(max(epsilons, default=0.0) - query_loss(tiers), 0.0)


def how_drawn(tiers: Mapping[int, StoredTier], tier: int) -> tuple[str, int | None]:
    """(how a new ``tier`` is drawn, the stored tier it leans on most) for the record."""
    less = [t for t in tiers if t < tier]
    more = [t for t in tiers if t > tier]
    if less and more:
        return BRIDGED, max(less)
    if less:
        return REFINED, max(less)
    if more:
        return SHARPENED, min(more)
    return FRESH, None


def draw(tiers: Mapping[int, StoredTier], tier: int, epsilons: tuple[float, ...],
         compute: Callable[[Any, Any], Release], rng, join=None) -> Release:
    """The release of ``tier`` at ``epsilons`` joined to the stored chain (``join``: the
    plan's own way to, else ``join_sound``)."""
    stored = {t: s.release() for t, s in tiers.items() if s.dp}
    return (join or join_sound)(stored, tier, epsilons, compute, rng)


def join_sound(stored: Mapping[int, Release], tier: int, epsilons: tuple[float, ...],
               compute: Callable[[Any, Any], Release], rng) -> Release:
    """A sound-mode tier joined to the stored ones (``dp_engine.sound.gradual``).

    ``compute(eps, rng)`` reads the data; it runs only when some group needs the truth (a
    fresh draw, or sharpening a noisier tier), and then with ``gradual.no_noise()`` first, for
    the template and the true values."""
    if not stored:
        return compute(epsilons, rng)
    if gradual.needs_truth(stored, tier, epsilons):
        template = compute(epsilons, gradual.no_noise())
        return gradual.join(stored, tier, epsilons, template=template, rng=rng)
    return gradual.join(stored, tier, epsilons, rng=rng)
