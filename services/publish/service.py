"""Published views: the owner curates released figures; the audience opens them for free.

Publishing releases nothing by itself: each figure is the ledger's served answer at the tier of
the page's audience role. A figure that role does not hold yet is released first through the
normal door (``ReleaseService.answer`` for that role, charging its budget), after the owner saw
the door's quote. Opening a page reads the stored answers only and logs one delivery per figure
(``Ledger.log_delivery``); it never computes and never spends.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import select

from dp_engine.errors import DPError
from services.identity import access
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger import db as ledger_db
from services.ledger import door
from services.ledger.models import releases as _RELEASES
from services.ledger.records import StoredRelease
from services.publish.records import AUDIENCE_ROLES, Audience, FigureRef, Page
from services.publish.store import PublishStore
from services.views.answer import ViewAnswer
from services.views.queries import PRESETS, VIEWS, ViewRequest, parse_request

CHANNEL = "published"
EXPORT_CHANNEL = "published-export"
MAX_FIGURES = 12
MAX_DAYS = 5 * 366
NOT_FOUND = ("There is no published page at this address, or it is not shared with you. "
             "Check the link with the person who sent it.")
"""One answer for an unknown page and for a page that is not the requester's to open."""
OWNER_ONLY = "Only the data owner (the hospital) can publish or withdraw pages."
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,79}$")


class PublishError(DPError):
    """A publish request that cannot be carried out as asked (nothing was released)."""


@dataclass(frozen=True)
class Candidate:
    """A view the owner may put on a page: a released view or a preset of the dataset."""

    key: str                       # JSON of the request (stable, used as the option value)
    label: str
    request: dict[str, str | None]  # dataset, view, x, group (no role: the page decides)
    released: bool                  # some role already holds a served copy


@dataclass(frozen=True)
class FigureQuote:
    """What putting one figure on the page costs the audience role now (the door's quote)."""

    label: str
    cost: float                     # ε charged to the role's budget (0: already released)
    cached: bool
    refusal: str | None


@dataclass(frozen=True)
class Draft:
    """A page the owner is building: untrusted fields, checked by ``PublishService``."""

    title: str
    dataset_id: str
    audience: Audience
    expires_on: date
    figures: tuple[tuple[str, str], ...]    # (candidate key, caption), in page order


@dataclass(frozen=True)
class ShownFigure:
    """One figure as opened: its caption, the ledger's stored release and its public answer."""

    ref: FigureRef
    release: StoredRelease
    answer: ViewAnswer


@dataclass(frozen=True)
class Opened:
    """What the audience may see of a page (``state``: "ok", "expired" or "withdrawn")."""

    page: Page
    state: str
    figures: tuple[ShownFigure, ...] = ()

    @property
    def total_epsilon(self) -> float:
        """The page's privacy cost: the ε its figures' releases charged (each release once)."""
        seen = {f.release.id: f.release.charged for f in self.figures}
        return math.fsum(seen.values())

    @property
    def message(self) -> str:
        if self.state == "withdrawn":
            return "This page was withdrawn by the data owner and can no longer be opened."
        if self.state == "expired":
            return (f"This page expired on {self.page.expires_at:%Y-%m-%d %H:%M} UTC and can no "
                    "longer be opened. Ask the data owner for a new link.")
        return ""


def parse_audience(value: object, user: object = None) -> Audience:
    """An audience from the form: "collaborator", "third_party", or "user" with a name."""
    if value == "user":
        name = user.strip() if isinstance(user, str) else ""
        if not name or len(name) > 200:
            raise PublishError("Type the user name of the person the page is for.")
        return Audience("user", name)
    if value in {r.value for r in AUDIENCE_ROLES}:
        return Audience("role", str(value))
    raise PublishError("Choose who the page is for: collaborators, third parties or one user.")


def request_key(req: dict[str, str | None]) -> str:
    return json.dumps({k: req.get(k) for k in ("dataset", "view", "x", "group")},
                      sort_keys=True, separators=(",", ":"))


class PublishService:
    """Publish, list, withdraw, open and export pages; owner checks on the server side."""

    def __init__(self, store: PublishStore, ledger, releases, registry, *,
                 user_role: Callable[[str], Role | None] = lambda _name: None) -> None:
        self.store = store
        self.ledger = ledger
        self.releases = releases
        self.registry = registry
        self.user_role = user_role

    # ---- owner -------------------------------------------------------------------------
    def pages(self, identity) -> list[Page]:
        _owner(identity)
        return self.store.list()

    def candidates(self, identity, dataset_id: str) -> list[Candidate]:
        """Released sound views of the dataset (any role's), then the presets not among them."""
        _owner(identity)
        ds = self.registry.get(dataset_id)
        found: dict[str, Candidate] = {}
        for rel in self.ledger.releases(dataset_id=ds.id, limit=2000):
            req = _request_of(rel)
            if req is None or not rel.dp:
                continue
            key = request_key(req)
            if key not in found and self._valid(ds, req):
                found[key] = Candidate(key, _label(ds, req), req, True)
        for p in PRESETS.values():
            req = {"dataset": ds.id, "view": p.view, "x": p.x, "group": p.group}
            key = request_key(req)
            if key not in found and self._valid(ds, req):
                found[key] = Candidate(key, _label(ds, req), req, False)
        return list(found.values())

    def quote(self, identity, draft: Draft) -> list[FigureQuote]:
        """The door's quote of every figure for the audience role; computes nothing public."""
        _owner(identity)
        ds, tier, reqs = self._checked(draft)
        payer = Identity(identity.user, tier, True)
        for req, _caption in reqs:     # a grouping nobody priced: the owner prices it
            self.releases.prepare(identity, req, dataset=ds)
        got = self.releases.quotes(payer, [r for r, _ in reqs], dataset=ds)
        quotes = []
        for (req, _caption), q in zip(reqs, got, strict=True):
            if isinstance(q, Exception):
                raise q
            cost = 0.0 if q.cached else float(q.cost)
            quotes.append(FigureQuote(_label(ds, _raw(req)), cost, q.cached, q.refusal))
        return quotes

    def publish(self, identity, draft: Draft, *, confirmed_cost: float) -> Page:
        """Release what the audience role lacks (after the owner confirmed ``confirmed_cost``,
        the quote's total), then store the page. Refuses if the price rose meanwhile."""
        quotes = self.quote(identity, draft)
        total = math.fsum(q.cost for q in quotes)
        refusal = next((q.refusal for q in quotes if q.refusal and not q.cached), None)
        if refusal:
            raise PublishError(f"Nothing was published: {refusal}")
        if total > float(confirmed_cost) + 1e-12:
            raise PublishError(f"The cost changed to ε {total:.3g} since it was shown; check it "
                               "again before publishing. Nothing was released.")
        ds, tier, reqs = self._checked(draft)
        payer = Identity(identity.user, tier, True)
        status = self.releases.status(payer, ds.id)
        left = [x for x in (status.role.remaining, status.user.remaining) if x is not None]
        if left and total > min(left) + 1e-12:
            raise PublishError(
                f"These figures cost ε {total:.3g} together but the {tier.label.lower()} "
                f"budget on '{ds.id}' has ε {min(left):.3g} left. Nothing was released.")
        answers = self.releases.answer_all(payer, [r for r, _ in reqs], dataset=ds,
                                           channel="publish", price=True)
        refs = [FigureRef(pos, caption, rid, _raw(req))
                for pos, ((req, caption), (_a, rid, _row)) in enumerate(zip(reqs, answers,
                                                                            strict=True))]
        now = ledger_db.now()
        title = draft.title.strip()
        return self.store.create(
            slug=_slug(title), title=title, dataset_id=ds.id, audience=draft.audience,
            tier_role=tier, expires_at=_end_of(draft.expires_on), created_by=identity.user,
            created_at=now, figures=refs)

    def withdraw(self, identity, slug: str) -> bool:
        _owner(identity)
        return self.store.withdraw(slug) if _SLUG.match(str(slug)) else False

    # ---- audience ----------------------------------------------------------------------
    def open(self, identity, slug: object, *, channel: str = CHANNEL) -> Opened | None:
        """The page for ``identity``: None (unknown or not theirs: one answer for both), or
        its state; when "ok", the stored answers, with one delivery logged per figure."""
        page = self.store.get(slug) if isinstance(slug, str) and _SLUG.match(slug) else None
        if page is None or not self.may_open(identity, page):
            return None
        if page.withdrawn:
            return Opened(page, "withdrawn")
        if page.expired(ledger_db.now()):
            return Opened(page, "expired")
        stored = self._stored([f.release_id for f in page.figures])
        shown = []
        for ref in page.figures:
            rel = stored.get(ref.release_id)
            if rel is None or not rel.dp or Role(rel.role) is not page.tier_role:
                continue    # never show anything but the page tier's DP release
            ans = replace(ViewAnswer.from_dict(rel.answer), realized_noise_percent=None)
            shown.append(ShownFigure(ref, rel, ans))
        for fig in shown:
            self.ledger.log_delivery(fig.release.id, user=identity.user, role=identity.role,
                                     channel=channel)
        return Opened(page, "ok", tuple(shown))

    @staticmethod
    def may_open(identity, page: Page) -> bool:
        """The owner, or an authenticated member of the audience at the page's tier."""
        if not getattr(identity, "authenticated", False):
            return False
        if access.is_owner(identity):
            return True
        if identity.role is not page.tier_role:
            return False
        if page.audience.kind == "user":
            return identity.user == page.audience.name
        return True

    # ---- internals ---------------------------------------------------------------------
    def _checked(self, draft: Draft):
        """(dataset, tier role, [(ViewRequest, caption)]) of a draft, or PublishError."""
        title = draft.title.strip() if isinstance(draft.title, str) else ""
        if not title or len(title) > 200:
            raise PublishError("Give the page a title (at most 200 characters).")
        ds = self.registry.get(draft.dataset_id)
        if not ds.schema.confirmed:
            raise PublishError(access.UNCONFIRMED)
        tier = self.tier_of(draft.audience)
        today = ledger_db.now().date()
        if not isinstance(draft.expires_on, date) or not (
                today <= draft.expires_on <= today + timedelta(days=MAX_DAYS)):
            raise PublishError("Choose an expiry date from today to five years ahead.")
        if not 1 <= len(draft.figures) <= MAX_FIGURES:
            raise PublishError(f"Pick between 1 and {MAX_FIGURES} figures.")
        reqs = []
        for key, caption in draft.figures:
            try:
                raw = json.loads(key) if isinstance(key, str) and len(key) < 1000 else None
            except ValueError:
                raw = None
            if not isinstance(raw, dict) or raw.get("dataset") != ds.id:
                raise PublishError("Pick the figures from the list of this dataset's views.")
            text = caption.strip() if isinstance(caption, str) else ""
            if len(text) > 500:
                raise PublishError("A caption may have at most 500 characters.")
            req = parse_request({**raw, "mechanism": "sound", "role": tier.value}, tier,
                                ds.schema)
            reqs.append((req, text))
        return ds, tier, reqs

    def tier_of(self, audience: Audience) -> Role:
        """The role whose tier a page for ``audience`` shows (a named user's own role)."""
        if audience.kind == "role":
            return Role(audience.name)
        role = self.user_role(audience.name)
        if role is None:
            raise PublishError(f"There is no user named '{audience.name}'.")
        return role

    def _valid(self, ds, req: dict) -> bool:
        try:
            parse_request({**req, "mechanism": "sound"}, Role.OWNER, ds.schema)
        except DPError:
            return False
        return True

    def _stored(self, release_ids: Sequence[int]) -> dict[int, StoredRelease]:
        """The ledger's served releases by id (one read; never logs a delivery)."""
        if not release_ids:
            return {}
        with self.ledger.db.tx(write=False) as conn:
            rows = conn.execute(select(_RELEASES).where(
                _RELEASES.c.id.in_([int(i) for i in release_ids]))).mappings().all()
        return {int(r["id"]): door.to_release(r) for r in rows}


def _owner(identity) -> None:
    if not access.is_owner(identity):
        raise PublishError(OWNER_ONLY)


def _raw(req: ViewRequest) -> dict[str, str | None]:
    return {"dataset": req.dataset_id, "view": req.view, "x": req.x, "group": req.group}


def _request_of(rel: StoredRelease) -> dict[str, str | None] | None:
    """The view request of a served release (its canonical query), or None."""
    try:
        q = json.loads(rel.query_key.rsplit("|as=", 1)[0])
    except ValueError:
        return None
    if not isinstance(q, dict) or q.get("mechanism") != "sound" or q.get("view") not in VIEWS:
        return None
    return {"dataset": q.get("dataset"), "view": q["view"], "x": q.get("x"),
            "group": q.get("group")}


def _label(ds, req: dict) -> str:
    x = ds.schema.column(req["x"]).label
    by = f" by {ds.schema.column(req['group']).label}" if req.get("group") else ""
    return f"{VIEWS[req['view']]} of {x}{by}"


def _slug(title: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].strip("-") or "page"
    return f"{base}-{secrets.token_hex(4)}"


def _end_of(day: date) -> datetime:
    """A page expires at the end of its expiry day (UTC)."""
    return datetime.combine(day + timedelta(days=1), time(0, 0), tzinfo=UTC)
