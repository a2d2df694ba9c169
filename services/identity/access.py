"""Access policy, written once: who may see owner pages, query a dataset, view as which role.

Every callback module asks these functions instead of comparing roles itself, so a rule
changes in one place. The identity always comes from the server session, never from input.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

from services.identity.roles import Role

UNCONFIRMED = ("This dataset's public schema has not been confirmed by the data owner yet, so "
               "it cannot be queried.")


class _Identity(Protocol):
    role: Role
    authenticated: bool


def is_owner(identity: _Identity) -> bool:
    """An authenticated data owner (the hospital): the only one to see owner pages."""
    return bool(getattr(identity, "authenticated", False)) and identity.role is Role.OWNER


def may_open(identity: _Identity, lowest: Role) -> bool:
    """May ``identity`` open a page whose lowest role is ``lowest``? Owner pages need the
    authenticated owner (``is_owner``); the others any role at least as high."""
    return is_owner(identity) if lowest is Role.OWNER else identity.role.rank >= lowest.rank


def may_query(identity: _Identity, dataset: Any) -> bool:
    """Non-owners may only query a dataset whose public schema the owner has confirmed."""
    return identity.role is Role.OWNER or bool(dataset.schema.confirmed)


_D = TypeVar("_D")


def queryable(identity: _Identity, datasets: Iterable[_D]) -> list[_D]:
    """The datasets ``identity`` may query (``may_query``), in order."""
    return [d for d in datasets if may_query(identity, d)]


def viewing_role(granted: Role, requested: object) -> Role:
    """The role a request is answered at: the requested one if not above ``granted``.

    Anything unparseable (or forged higher) is answered at the granted role, never higher.
    """
    return granted.clamp(requested)


def mechanism_for(granted: Role, viewing: Role, requested: object) -> str:
    """Paper mode is the owner's, looking as the owner; anyone else gets sound mode."""
    if requested == "paper" and granted is Role.OWNER and viewing is Role.OWNER:
        return "paper"
    return "sound"
