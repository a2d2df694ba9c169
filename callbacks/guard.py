"""The web layer's one role check: every page and every owner-only callback asks here.

A page is declared once (``Page``: its URL, its label, the lowest role that may open it and
the function that draws it) and drawn only through ``open_page``, which refuses anyone below
that role. A callback that only the data owner may use is wrapped in ``owner_only`` (or asks
``owner``) and answers anyone else with its page's refusal, whatever the request says: the
identity comes from the server session. The rules themselves are ``services.identity.access``;
a published view's audience is checked by ``PublishService.open`` (outsiders get the answer
of an unknown page).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from layouts.components import shell
from services.container import Services
from services.identity import access
from services.identity.roles import Role

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Page:
    """One page of the app. ``path`` is its URL, or a Dash Pages template such as
    ``/views/<slug>``; ``render(services, identity, path)`` draws it for a caller already
    allowed in; ``nav``: listed in the navigation bar; ``title_at(path)``: the document title
    of a page whose title depends on its URL (a published page's own), else its label's."""

    name: str
    path: str
    label: str
    lowest: Role
    render: Callable[[Services, Any, str], Any]
    nav: bool = True
    title_at: Callable[[str], str] | None = None

    @property
    def title(self) -> str:
        return shell.page_title(self.label)

    def title_for(self, path: str) -> str:
        """The document title at ``path`` (one of this page's URLs)."""
        return self.title_at(path) if self.title_at is not None else self.title


def allowed(page: Page, identity: Any) -> bool:
    """May ``identity`` open ``page``?"""
    return access.may_open(identity, page.lowest)


def refusal(page: Page) -> Any:
    """What anyone below ``page``'s lowest role gets, from the page or any of its callbacks."""
    return shell.forbidden(page.label)


def open_page(page: Page, services: Services, identity: Any, path: str) -> Any:
    """``page`` drawn for ``identity``, or a refusal below its lowest role."""
    if not allowed(page, identity):
        return refusal(page)
    return page.render(services, identity, path)


def owner(services: Services) -> Any | None:
    """The session's identity if it is the authenticated data owner's, else None."""
    identity = services.identity.current()
    return identity if access.is_owner(identity) else None


def owner_only(refusal: Any) -> Callable[[F], F]:
    """A callback handler ``fn(services, ...)`` run for the data owner only; anyone else gets
    ``refusal`` (called first when it is a function, so each refusal is a new component)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def guarded(services: Services, *args: Any, **kwargs: Any) -> Any:
            if owner(services) is None:
                return refusal() if callable(refusal) else refusal
            return fn(services, *args, **kwargs)

        return guarded  # type: ignore[return-value]

    return wrap
