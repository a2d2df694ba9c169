"""What an Explore screen shows, as data: the session work behind the page's one callback.

``screen_data`` reads, prices, previews and releases for one event of the page (a control
changed, a preset, Release, a reopened release) and returns a ``ScreenData``: previews,
answers, notes, new control values and the role's lists — plain data the callback renders.
With runner children (the deployment), the web worker reads the screen once: answers the
role already has are served there (the read, then the delivery log), a fresh release that
read decided is sent to the runner as the door's work alone (``released``: the door's two
transactions, nothing read again), and any other screen that computes (a preview, pricing, a
costly plan) is the runner's whole work. Inline, all of it is one call. Every input is
untrusted: the identity comes from the server session, the request is parsed again from the
submitted controls, and a release id names a stored release only if it belongs to the
session's role.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from dp_engine.bands import NOISE_LABELS
from dp_engine.errors import BudgetExceededError, DPError
from services.identity import access
from services.identity.roles import Role
from services.ledger import db as ledger_db
from services.ledger.records import AccountStatus, StoredRelease
from services.runner import JobDied
from services.session import ScreenRead, Session, asks_first, left_of
from services.studio.naming import is_studio
from services.views.answer import ViewAnswer
from services.views.inputs import PlanPending, known_plans_only
from services.views.plans import LEFT_OUT
from services.views.preview import Preview, preview
from services.views.queries import GROUPABLE_KINDS, PRESETS, Preset, ViewRequest, parse_request
from services.views.report import query_words

log = logging.getLogger(__name__)
PRESET, DATASET, RELEASE, REOPEN = "preset", "dataset", "release", "reopen"
"""The events of the page (``action``); None: a control changed."""
CONTROLS = ("view", "x", "group", "without", "role", "mechanism", "compare")
STUDIO_TABLE = ("Release #{id} is a table from the Release page ({name}), not a figure, so it "
                "is not drawn here; the ledger keeps its record, and the Release page makes a "
                "new one.")
KEEP = "keep"
"""``ScreenData.preset`` value that leaves the preset control as it is."""
DIED = ("Failed: the server process computing this view ended before it finished. Nothing "
        "was charged; try again.")
DIED_CHARGED = ("Failed: the server process computing this view ended after its release was "
                "recorded. My releases opens it free.")


@dataclass
class ScreenData:
    """One screen as data. ``kind``: "preview", "released" or "message"."""

    kind: str = "message"
    previews: list[Preview] = field(default_factory=list)
    answers: list[tuple[ViewAnswer, int | None]] = field(default_factory=list)
    priced: float | None = None               # ε just charged for a grouping's sizes
    note: str | None = None                   # replaces the note under the Release button
    message: str | None = None
    colour: str = "warning"                   # of the message: info, warning, danger
    controls: dict[str, Any] = field(default_factory=dict)
    preset: Any = KEEP
    preset_options: list[dict] | None = None
    mine: list[StoredRelease] | None = None   # the role's releases (My releases), if read
    compare_paper: bool = False               # compare mode asked in paper mode: say why


# ---- requests ----------------------------------------------------------------------------

def dataset_for(services: Any, identity, dataset: Any):
    return services.registry.get(dataset if isinstance(dataset, str) else "",
                                 owner=identity.role is Role.OWNER)


def requests_for(identity, ds, c: dict[str, Any]) -> list[ViewRequest]:
    """The request(s) the controls ask for: three tiers in the owner's compare mode."""
    req = parse_request({k: c.get(k) for k in ("dataset", "role", "view", "x", "group",
                                                 "mechanism", "without")}, identity.role,
                        ds.schema)
    if c.get("compare") is True and access.is_owner(identity):
        return [replace(req, role=r, mechanism="sound")
                for r in (Role.OWNER, Role.COLLABORATOR, Role.THIRD_PARTY)]
    return [req]


def preset_controls(identity, preset: Preset, c: dict[str, Any]) -> tuple[dict, list[str]]:
    """The controls a preset sets, and why any mode had to change for it."""
    granted: Role = identity.role
    role = access.viewing_role(granted, preset.role.value) if preset.role else granted
    notes: list[str] = []
    mechanism = c.get("mechanism") if c.get("mechanism") in ("sound", "paper") else "sound"
    if mechanism == "paper" and access.mechanism_for(granted, role, "paper") != "paper":
        notes.append(f"{preset.label} is drawn at {NOISE_LABELS[role.noise_factor]} noise "
                     f"({role.label.lower()} tier), which paper mode cannot draw: it is shown "
                     "in sound mode.")
        mechanism = "sound"
    if c.get("compare") is True:
        notes.append("A preset draws one figure: compare mode was switched off.")
    return ({**c, "view": preset.view, "x": preset.x, "group": preset.group or "none",
             "without": [], "role": role.value, "mechanism": mechanism, "compare": False},
            notes)


def matching_preset(identity, key: Any, c: dict[str, Any]) -> str | None:
    """``key`` if the controls still show that preset, else None (the control clears)."""
    preset = PRESETS.get(key) if isinstance(key, str) else None
    if preset is None:
        return None
    want, _ = preset_controls(identity, preset, c)
    same = all(want[k] == c.get(k) for k in CONTROLS if k != "compare")
    return key if same and c.get("compare") is not True else None


def preset_requests(identity, ds, c: dict[str, Any]) -> list[ViewRequest | None]:
    """The request each preset would make from controls ``c`` (None: not on this dataset)."""
    out: list[ViewRequest | None] = []
    for p in PRESETS.values():
        want, _ = preset_controls(identity, p, {**c, "dataset": ds.id})
        try:
            (req,) = requests_for(identity, ds, {**want, "compare": False})
        except DPError:
            req = None
        out.append(req)
    return out


def preset_options(quotes: list[Any], served: set[str] = frozenset()) -> list[dict]:
    """Each preset with what choosing it would cost now (or why it cannot be chosen), from
    the quotes the screen read; ``served``: presets answered by this very screen."""
    out = []
    for (key, p), quote in zip(PRESETS.items(), quotes, strict=True):
        if isinstance(quote, PlanPending):
            out.append({"label": f"{p.label} · price shown when chosen", "value": key})
            continue
        if isinstance(quote, DPError):
            out.append({"label": f"{p.label} · not available on this dataset", "value": key,
                        "disabled": True})
            continue
        if isinstance(quote, Exception):
            raise quote
        if quote.cached or key in served:
            cost = "released: opens free"
        elif quote.plan is None:
            cost = f"price its grouping first (ε {quote.cost:.3g})"
        elif not quote.plan.dp:
            cost = "paper mode, not DP"
        else:
            cost = f"ε {quote.cost:.3g}"
        out.append({"label": f"{p.label} · {cost}", "value": key})
    return out


def columns_for(ds, c: dict[str, Any]) -> dict[str, Any]:
    """After a dataset switch: keep the columns if the new schema has them, else the first."""
    cols = ds.schema.queryable_columns()
    xs = [col.name for col in cols]
    groups = [col.name for col in cols if col.kind in GROUPABLE_KINDS and col.categories]
    x = c.get("x") if c.get("x") in xs else (xs[0] if xs else None)
    group = c.get("group") if c.get("group") in groups and c.get("group") != x else "none"
    return {"x": x, "group": group}


def _look(session: Session, ds, reqs: list[ViewRequest], c: dict[str, Any]) -> ScreenRead:
    """The screen's one read: its requests, the presets' prices, the role's releases."""
    return session.look(ds, reqs, presets=preset_requests(session.identity, ds, c))


class Computes(Exception):  # noqa: N818 - a signal, not an error
    """``screen_data(cached_only=True)`` met a screen that computes something other than a
    decided release (a preview, pricing, a costly plan): the runner's whole work."""


def died(session: Session, dataset_id: str, started: datetime) -> ScreenData:
    """The screen after the runner's process ended mid-work: whether it had charged the
    caller is read from the ledger (a release of theirs since ``started``), nothing else."""
    charged = session.charged_since(dataset_id, started)
    return ScreenData(message=DIED_CHARGED if charged else DIED, colour="danger", preset=None)


QUICK = (None, DATASET)
"""Actions whose screen spends nothing (a control or the dataset changed: a preview with
its price): the runner's quick lane. A preset, Release and a reopen may spend or serve."""


def on_runner(services: Any, identity, action: str | None, preset: Any, c: dict[str, Any],
              reopen: Any = None) -> ScreenData:
    """The whole screen as the runner's work; if its process died, whether it charged."""
    started = ledger_db.now()
    try:
        return services.runner.call(screen_data, identity, action, preset, c, reopen,
                                    quick=action in QUICK)
    except JobDied:
        log.warning("Explore screen: the runner's process died", exc_info=True)
        return died(Session(services, identity), str(c.get("dataset")), started)


def released(services: Any, _progress: Any, identity, dataset_id: str,
             reqs: list[ViewRequest]) -> list:
    """Runner work: the fresh release of ``reqs`` that the web worker's read decided, through
    the door alone (its two transactions; nothing read again)."""
    ds = dataset_for(services, identity, dataset_id)
    return Session(services, identity).serve(ds, reqs)


# ---- the screen --------------------------------------------------------------------------

def screen_data(services: Any, _progress: Any, identity, action: str | None, preset: Any,
                c: dict[str, Any], reopen: Any = None, *, cached_only: bool = False
                ) -> ScreenData:
    """The screen for ``identity`` (from the session) and the untrusted controls ``c``
    (runner work: ``fn(services, progress, *args)``).

    One read (``Session.look``) gives everything shown; a screen of answers the role has then
    logs its deliveries in one more transaction, a fresh release spends through the door
    (two), and the lists under the chart are the read's, brought up to date.
    ``cached_only`` (the web worker, with runner children): a fresh release is the runner's
    ``released``; anything else that computes (a preview, pricing, a costly plan) raises
    ``Computes``, so the caller hands the whole screen to the runner."""
    session = Session(services, identity)
    try:
        ds = dataset_for(services, identity, c.get("dataset"))
        if action == REOPEN:
            rel = session.reopen(reopen, dataset_id=ds.id)
            if rel is None:
                raise DPError("That release is not one of your role's on this dataset.")
            if is_studio(rel.answer):
                raise DPError(STUDIO_TABLE.format(id=rel.id, name=query_words(rel.answer)))
            look = _look(session, ds, [], c)
            data = _reopened(session, rel, look.status)
            data.preset = None
        elif cached_only:
            try:
                with known_plans_only():      # a costly plan nobody made: this screen computes
                    data, look = _event(session, ds, action, preset, c, cached_only=True)
            except PlanPending:
                raise Computes from None
        else:
            data, look = _event(session, ds, action, preset, c)
        if data.preset_options is None:
            data.preset_options = preset_options(look.preset_quotes)
        data.mine = look.mine
        return data
    except BudgetExceededError as exc:
        return ScreenData(message=str(exc), colour="danger", preset=None)
    except DPError as exc:
        return ScreenData(message=str(exc), preset=None)


def _event(session: Session, ds, action: str | None, preset: Any,
           c: dict[str, Any], cached_only: bool = False) -> tuple[ScreenData, ScreenRead]:
    identity = session.identity
    notes: list[str] = []
    if action == PRESET and isinstance(preset, str) and preset in PRESETS:
        c, notes = preset_controls(identity, PRESETS[preset], c)
    elif action == DATASET:
        c = {**c, **columns_for(ds, c)}
    reqs = requests_for(identity, ds, c)
    look = _look(session, ds, reqs, c)
    spend = action in (PRESET, RELEASE)
    ask = action == PRESET and not look.all_served and look.priced \
        and _asks_first(look, identity.role)
    fresh = not look.all_served and spend and look.priced and not ask
    if cached_only and not look.all_served and not fresh:
        raise Computes
    served: set[str] = set()
    if ask:               # a large share of what is left: the Release button confirms
        data = _preview(session, ds, look)
        notes.append(_ask_text(PRESETS[preset].label, look))
    elif look.all_served or fresh:
        if fresh and cached_only:     # the door's work, on the runner (heavy lane)
            started = ledger_db.now()
            try:
                answers = session.services.runner.call(released, identity, ds.id, reqs)
            except JobDied:
                log.warning("Explore release: the runner's process died", exc_info=True)
                return died(session, ds.id, started), look
        else:
            answers = session.serve(ds, reqs)
        data = ScreenData(kind="released", answers=[(a, rid) for a, rid, _ in answers])
        look.mine = _with_new(look.mine, [row for _, _, row in answers if row is not None])
        served = {key for key, q in zip(PRESETS, look.preset_quotes, strict=True)
                  if any(_same(q, r, session, ds) for r in reqs)}
    elif action == RELEASE:
        charged = session.price(ds, reqs[0])
        look = _look(session, ds, reqs, c)
        data = _preview(session, ds, look)
        data.priced = charged
    else:
        data = _preview(session, ds, look)
        if spend:          # a preset whose grouping nobody priced: priced on purpose
            need = next(q for q in look.quotes if getattr(q, "missing_inputs", ()))
            notes.append(f"{PRESETS[preset].label} needs its grouping priced first: "
                         f"ε {need.cost:.3g} from your budget, then its exact price "
                         "shows and Release spends it.")
    if action == PRESET:
        data.controls = {k: c[k] for k in CONTROLS}
        data.message = " ".join(notes) if notes else None
        data.colour = "info"
    else:
        if action == DATASET:
            data.controls = {k: c[k] for k in ("x", "group")}
        data.preset = matching_preset(identity, preset, c)
        data.compare_paper = len(reqs) > 1 and c.get("mechanism") == "paper"
    data.preset_options = preset_options(look.preset_quotes, served)
    return data, look


def _preview(session: Session, ds, look: ScreenRead) -> ScreenData:
    """Free previews with the release's price, from the screen's one read."""
    shown = [preview(session.releases, session.identity, r, ds, plan=p, quote=q,
                     internals=look.internals)
             for r, p, q in zip(look.requests, look.plans, look.quotes, strict=True)]
    return ScreenData(kind="preview", previews=shown)


def _reopened(session: Session, rel: StoredRelease, status: AccountStatus) -> ScreenData:
    """A stored release shown again, free (its delivery logged), controls set to it."""
    ans = replace(ViewAnswer.from_dict(rel.answer), cached=True, epsilon_charged=0.0,
                  budget_limit=status.role.limit, budget_spent=status.role.spent,
                  budget_remaining=status.role.remaining, user_limit=status.user.limit,
                  user_spent=status.user.spent, dataset_loss=status.dataset.loss,
                  dataset_cap=status.dataset.cap)
    if not access.is_owner(session.identity):
        ans = ans.without_truth()       # every field computed from true values, not one
    controls = {"view": ans.view, "x": ans.x, "group": ans.group or "none",
                "without": [g for g, why in zip(ans.groups, ans.withheld_reason or [],
                                                strict=False) if why == LEFT_OUT],
                "role": access.viewing_role(session.role, ans.role).value,
                "mechanism": ans.mechanism, "compare": False}
    return ScreenData(kind="released", answers=[(ans, rel.id)], controls=controls,
                      note=f"Reopened release #{rel.id} free.")


def _asks_first(look: ScreenRead, role: Role) -> bool:
    """Whether a preset would take more than a quarter of a non-owner's remaining budget
    (the rule is the session's: ``services.session.asks_first``)."""
    return asks_first(role, look.status, sum(getattr(q, "cost", 0.0) for q in look.quotes))


def _ask_text(label: str, look: ScreenRead) -> str:
    cost = sum(getattr(q, "cost", 0.0) for q in look.quotes)
    return (f"{label} costs ε {cost:.3g}, more than a quarter of what your role has left "
            f"(ε {left_of(look.status):.3g}). Nothing is spent yet: press Release "
            f"(ε {cost:.3g}) to release it, or change a control (e.g. leave out the group "
            "that sets the price).")


def _same(quote: Any, req: ViewRequest, session: Session, ds) -> bool:
    """Whether a preset's quote is for ``req`` (the screen just answered it)."""
    plan = getattr(quote, "plan", None)
    key = plan.key if plan is not None else None
    return key is not None and key == session.plan(ds, req).key


def _with_new(mine: list[StoredRelease], rows: list[StoredRelease]) -> list[StoredRelease]:
    """The role's releases with those this screen just stored, newest first."""
    have = {r.id for r in mine}
    new = sorted((r for r in rows if r.id not in have), key=lambda r: r.id, reverse=True)
    return new + mine
