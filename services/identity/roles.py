"""Roles of the dashboard, their privilege order and default noise factor."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """Who is looking. Higher rank = more privilege (owner is the hospital)."""

    OWNER = "owner"
    COLLABORATOR = "collaborator"
    THIRD_PARTY = "third_party"

    @property
    def rank(self) -> int:
        return {Role.OWNER: 2, Role.COLLABORATOR: 1, Role.THIRD_PARTY: 0}[self]

    @property
    def noise_factor(self) -> int:
        """Default noise factor: 0 low, 1 medium, 2 high (the PyDPLib mapping)."""
        return {Role.OWNER: 0, Role.COLLABORATOR: 1, Role.THIRD_PARTY: 2}[self]

    @property
    def label(self) -> str:
        return {Role.OWNER: "Owner", Role.COLLABORATOR: "Collaborator",
                Role.THIRD_PARTY: "Third party"}[self]

    def allowed(self) -> list[Role]:
        """This role and every lower one: what the role selector may offer."""
        return [r for r in Role if r.rank <= self.rank]

    def clamp(self, requested: object) -> Role:
        """The role a request is answered at: the requested one if not higher, else self.

        Anything unparseable is answered at the granted role (never higher).
        """
        try:
            want = Role(str(requested))
        except ValueError:
            return self
        return want if want.rank <= self.rank else self

