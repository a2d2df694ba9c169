"""Published views: the owner curates released figures; the audience opens them for free.

Publishing releases nothing by itself: each figure is the ledger's served answer at the tier of
the page's audience role. The figures that role does not hold yet are released first, all or
nothing, in one call of the door (``Session.serve`` as that role, charging its budget; a figure
refused leaves nothing charged and no page), after the owner saw the quote (``PageQuote``, one
read: each figure's price, what the audience may still spend, how many figures it cannot
afford). Opening a page reads the stored answers only and logs one delivery per figure in the
same transaction (``Session.open_stored``); it never computes and never spends. Everything
about the ledger goes through ``services.session.Session``. The owner's cohort description of
each dataset (``services.publish.cohort``) and the dataset version's DP number of records head
every page."""

from __future__ import annotations

import itertools
import json
import math
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from types import SimpleNamespace

from dp_engine.errors import BudgetExceededError, DPError
from services.identity import access
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger import db as ledger_db
from services.ledger.records import StoredRelease
from services.publish import cohort as cohort_text
from services.publish.records import AUDIENCE_ROLES, Audience, Cohort, FigureRef, Page
from services.publish.store import PublishStore
from services.session import Session
from services.views.answer import ViewAnswer
from services.views.queries import PRESETS, VIEWS, ViewRequest, parse_request
from services.views.statistics import group_keys

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
    """What putting one figure on the page costs the audience role now (the door's quote).

    ``withheld``: the groups the audience's tier withholds (too few patients), ``groups``:
    how many groups the figure has; a figure with every group withheld shows as a sentence.
    """

    label: str
    cost: float                     # ε charged to the role's budget (0: already released)
    cached: bool
    refusal: str | None
    withheld: tuple[str, ...] = ()
    groups: int = 1

    @property
    def all_withheld(self) -> bool:
        return self.groups > 0 and len(self.withheld) >= self.groups


@dataclass(frozen=True)
class PageQuote:
    """What publishing a draft costs its audience, and whether the audience can afford it.

    ``remaining`` is the ε the audience may still spend on the dataset: the role's budget, or
    the named user's own limit inside it when that is smaller (``limited_by`` "role" /
    "user"; None: no limit). Nothing here was spent: it is read from the ledger's quotes.
    """

    figures: tuple[FigureQuote, ...]
    role: Role
    dataset_id: str
    dataset_title: str
    remaining: float | None
    limit: float | None
    limited_by: str = "role"

    @property
    def total(self) -> float:
        return math.fsum(q.cost for q in self.figures)

    @property
    def refusals(self) -> list[tuple[str, str]]:
        """(figure, the door's reason) for each figure that cannot be released as it is for
        another reason than the audience's budget (``unaffordable`` counts those)."""
        return [(q.label, q.refusal) for q in self.figures
                if q.refusal and not q.cached and not self._over_budget(q)]

    def _over_budget(self, q: FigureQuote) -> bool:
        return self.remaining is not None and q.cost > self.remaining + 1e-12

    @property
    def unaffordable(self) -> int:
        """The fewest figures to take off the page so that the rest fit the audience's
        budget (0 when they all fit)."""
        if self.remaining is None:
            return 0
        costs = sorted(q.cost for q in self.figures if not q.cached and q.cost > 0)
        fit = sum(spent <= self.remaining + 1e-12 for spent in itertools.accumulate(costs))
        return len(costs) - fit

    @property
    def affordable(self) -> bool:
        return self.unaffordable == 0 and not self.refusals

    def most_expensive(self, n: int) -> list[FigureQuote]:
        """The ``n`` costliest figures not yet released (what to take off first)."""
        return sorted((q for q in self.figures if not q.cached and q.cost > 0),
                      key=lambda q: -q.cost)[:n]


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
    """What the audience may see of a page (``state``: "ok", "expired" or "withdrawn").

    ``cohort``: the owner's description of the dataset's cohort; ``n_hat``: the DP number of
    records of the figures' dataset version (public), None if it was never released.
    """

    page: Page
    state: str
    figures: tuple[ShownFigure, ...] = ()
    cohort: Cohort | None = None
    n_hat: int | None = None

    @property
    def dataset_title(self) -> str:
        titles = [f.answer.dataset_title for f in self.figures if f.answer.dataset_title]
        return titles[0] if titles else self.page.dataset_id

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
        views = [(_request_of(rel), True)
                 for rel in self.ledger.releases(dataset_id=ds.id, limit=2000) if rel.dp]
        views += [({"dataset": ds.id, "view": p.view, "x": p.x, "group": p.group}, False)
                  for p in PRESETS.values()]
        for req, released in views:
            key = request_key(req) if req is not None else None
            if key is not None and key not in found and self._valid(ds, req):
                found[key] = Candidate(key, _label(ds, req), req, released)
        return list(found.values())

    def quote(self, identity, draft: Draft) -> PageQuote:
        """The door's quote of every figure for the audience role, with what the audience
        may still spend; releases nothing but a grouping's DP sizes nobody priced yet (the
        owner prices them)."""
        _owner(identity)
        ds, tier, reqs = self._checked(draft)
        owner = Session(self, identity)
        for req, _caption in reqs:     # a grouping nobody priced: the owner prices it
            owner.price(ds, req)
        payer = Session(self, Identity(identity.user, tier, True))
        seen = payer.look(ds, [r for r, _ in reqs], history=0)
        quotes = []
        for (req, _caption), q in zip(reqs, seen.quotes, strict=True):
            if isinstance(q, Exception):
                raise q
            cost = 0.0 if q.cached else float(q.cost)
            keys = group_keys(ds.schema.column(req.group) if req.group else None)
            quotes.append(FigureQuote(_label(ds, _raw(req)), cost, q.cached, q.refusal,
                                      self._withheld(payer, req, ds, q, keys), len(keys)))
        status = seen.status
        limits = [(status.role.remaining, status.role.limit, "role"),
                  (status.user.remaining, status.user.limit, "user")]
        known = [x for x in limits if x[0] is not None]
        remaining, limit, by = min(known, key=lambda x: x[0]) if known else (None, None, "")
        return PageQuote(tuple(quotes), tier, ds.id, ds.title or ds.id, remaining, limit, by)

    def _withheld(self, payer: Session, req: ViewRequest, ds, quote,
                  keys: list[str]) -> tuple[str, ...]:
        """The groups of ``req`` withheld at the payer's tier (from the plan, or the stored
        answer when the audience already holds it)."""
        if quote.plan is not None:
            eps = quote.plan.epsilons.get(quote.plan.key.tier)
            values = eps if isinstance(eps, tuple | list) else [eps]
            return tuple(k for k, e in zip(keys, values, strict=False) if not e)
        if quote.cached:
            stored = payer.stored(ds, req)
            if stored is not None:
                flags = stored.answer.get("withheld") or []
                return tuple(k for k, w in zip(stored.answer.get("groups", keys), flags,
                                               strict=False) if w)
        return ()

    def publish(self, identity, draft: Draft, *, confirmed_cost: float) -> Page:
        """Release what the audience role lacks (after the owner confirmed ``confirmed_cost``,
        the quote's total), all or nothing, then store the page. Refuses if the price rose
        meanwhile, or if the door refuses any figure (nothing charged, no page)."""
        quoted = self.quote(identity, draft)
        total = quoted.total
        refusal = next((why for _label, why in quoted.refusals), None)
        if refusal:
            raise PublishError(f"Nothing was published: {refusal}")
        if total > float(confirmed_cost) + 1e-12:
            raise PublishError(f"The cost changed to ε {total:.3g} since it was shown; check it "
                               "again before publishing. Nothing was released.")
        ds, tier, reqs = self._checked(draft)
        payer = Session(self, Identity(identity.user, tier, True))
        try:
            answers = payer.serve(ds, [r for r, _ in reqs], channel="publish", price=True)
        except BudgetExceededError as exc:
            raise PublishError(f"Nothing was released and no page was stored: {exc}") from None
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
        page = self._page(identity, slug)
        if page is None:
            return None
        if page.withdrawn:
            return Opened(page, "withdrawn")
        if page.expired(ledger_db.now()):
            return Opened(page, "expired")
        stored = {rel.id: rel for rel in Session(self, identity).open_stored(
            [f.release_id for f in page.figures], paid_by=page.tier_role, channel=channel)}
        shown = [ShownFigure(ref, stored[ref.release_id],   # only the page tier's DP releases
                             ViewAnswer.from_dict(stored[ref.release_id].answer).without_truth())
                 for ref in page.figures if ref.release_id in stored]
        version = shown[0].release.dataset_version if shown else None
        return Opened(page, "ok", tuple(shown), self.store.cohort(page.dataset_id),
                      self._public_size(page.dataset_id, version))

    def title_for(self, identity, slug: object) -> str | None:
        """The title of the page at ``slug`` if ``identity`` may open it (else None, as for
        an unknown page); reads no figure and logs nothing."""
        page = self._page(identity, slug)
        return page.title if page is not None else None

    def _page(self, identity, slug: object) -> Page | None:
        """The page at ``slug`` if ``identity`` may open it (else None, as for an unknown one)."""
        page = self.store.get(slug) if isinstance(slug, str) and _SLUG.match(slug) else None
        return page if page is not None and self.may_open(identity, page) else None

    def _public_size(self, dataset_id: str, version: str | None) -> int | None:
        """n̂ of a dataset version: its DP number of records, if released (public)."""
        if version is None:
            return None
        return self.releases.public_size(SimpleNamespace(id=dataset_id, version=version))

    # ---- the cohort description (owner writes, every page of the dataset shows) ---------
    def cohort(self, identity, dataset_id: str) -> Cohort:
        """The owner's description of the dataset's cohort (empty when none was written)."""
        _owner(identity)
        return self.store.cohort(self.registry.get(dataset_id).id)

    def save_cohort(self, identity, dataset_id: str, period: object, inclusion: object,
                    source: object) -> Cohort:
        """Check and store the owner's description of a dataset's cohort."""
        _owner(identity)
        ds = self.registry.get(dataset_id)
        text = cohort_text.checked(ds.id, period, inclusion, source)
        return self.store.save_cohort(text, user=identity.user, at=ledger_db.now())

    @staticmethod
    def may_open(identity, page: Page) -> bool:
        """The owner, or an authenticated member of the audience at the page's tier."""
        if not getattr(identity, "authenticated", False):
            return False
        return access.is_owner(identity) or (identity.role is page.tier_role and (
            page.audience.kind != "user" or identity.user == page.audience.name))

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
            return parse_request({**req, "mechanism": "sound"}, Role.OWNER, ds.schema) is not None
        except DPError:
            return False


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
