"""What the publish store hands back: a page, its figures, an audience, a draft to publish."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from services.identity.roles import Role

AUDIENCE_ROLES = (Role.COLLABORATOR, Role.THIRD_PARTY)
"""The roles a page may be published to (the owner sees every page anyway)."""


@dataclass(frozen=True)
class Audience:
    """Who a page is for: every user of a role, or one named user (``kind`` "role" / "user")."""

    kind: str
    name: str

    @property
    def label(self) -> str:
        if self.kind == "role":
            return {Role.COLLABORATOR: "Collaborators", Role.THIRD_PARTY: "Third parties"}[
                Role(self.name)]
        return f"User '{self.name}'"


@dataclass(frozen=True)
class FigureRef:
    """One figure of a page: its caption, the ledger's served release and the view request."""

    position: int
    caption: str
    release_id: int
    request: dict[str, Any]


@dataclass(frozen=True)
class Page:
    """A published page as stored (``tier_role``: the role whose tier its figures are at)."""

    id: int
    slug: str
    title: str
    dataset_id: str
    audience: Audience
    tier_role: Role
    expires_at: datetime
    withdrawn: bool
    created_by: str
    created_at: datetime
    figures: tuple[FigureRef, ...] = field(default=())

    def expired(self, at: datetime) -> bool:
        return at >= self.expires_at


@dataclass(frozen=True)
class Cohort:
    """The owner's words about a dataset's cohort (shown at the top of its published pages).

    ``period``: when the records were collected; ``inclusion``: who is in the cohort;
    ``source``: where the records come from. Text the owner wrote, checked by
    ``services.publish.cohort.checked``; never a number computed from the data.
    """

    dataset_id: str
    period: str = ""
    inclusion: str = ""
    source: str = ""
    updated_by: str = ""
    updated_at: datetime | None = None

    @property
    def empty(self) -> bool:
        return not (self.period or self.inclusion or self.source)
