"""Explore-page callbacks: preview for free, release on purpose, reopen free, export.

One callback owns the screen, so it always matches the controls: changing a control shows a
free preview (or opens a view already released to the role, free); the Release button and a
preset spend through the ledger's door; choosing an item of "My releases" reopens it free and
sets the controls to it. Every input is untrusted: the identity (and so the paying role) comes
from the server session, the request is parsed again from the submitted controls, and a
release id names a stored release only if it belongs to the session's role.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

from callbacks.guard import Page
from dp_engine.bands import NOISE_LABELS
from dp_engine.errors import BudgetExceededError, DPError
from layouts import ids
from layouts.components.accessible import chart
from layouts.components.figures import build, caption, shared_range
from layouts.explore import page
from layouts.explore import panel as panels
from layouts.explore import preview as previews
from layouts.explore.my_releases import figure_tools, release_options
from layouts.explore.page import column_options, group_options
from layouts.explore.rendered import RenderCache
from services.container import Services
from services.identity import access
from services.identity.roles import Role
from services.ledger.records import StoredRelease
from services.session import ScreenRead, Session, asks_first, left_of
from services.studio.naming import is_studio
from services.views.answer import ViewAnswer
from services.views.inputs import PlanPending
from services.views.plans import LEFT_OUT
from services.views.preview import preview
from services.views.queries import PRESETS, Preset, ViewRequest, parse_request
from services.views.report import query_words
from services.views.statistics import group_keys

log = logging.getLogger(__name__)
ROW = "explore-row"
CONTROLS = ("view", "x", "group", "without", "role", "mechanism", "compare")
OUTPUTS = 18
_RENDERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Each app's drawn stored releases (``layouts/explore/rendered.py``), keyed by its ledger."""


def page_view(services: Services, identity, _path: str = "/"):
    """The Explore page over the datasets ``identity`` may query."""
    return page.layout(access.queryable(identity, services.registry.list()), identity)


PAGE = Page("explore", "/", "Explore", Role.THIRD_PARTY, page_view)
FAILED = ("This view could not be computed. Nothing was charged and your data and budget are "
          "unchanged; try another view or contact the data owner.")
STUDIO_TABLE = ("Release #{id} is a table from the Release page ({name}), not a figure, so it "
                "is not drawn here; the ledger keeps its record, and the Release page makes a "
                "new one.")


def _alert(text: str, colour: str = "warning") -> dbc.Alert:
    return dbc.Alert(text, color=colour, className="py-2")


def _graph(fig, index: int | str, ans: ViewAnswer) -> html.Div:
    """The chart, what its marks mean (text that wraps on any screen) and its data table
    (the text alternative: the figure's own DP numbers)."""
    return chart(fig, {"type": ids.EX_GRAPH, "index": str(index)}, className="dp-graph",
                 note=caption(ans))


@dataclass
class Screen:
    """What the Explore callback writes. ``controls``: new control values (None: keep)."""

    graphs: Any = None
    panel: Any = None
    message: Any = None
    row: str = ROW
    release_label: str = "Release"
    release_disabled: bool = True
    note: str = ""
    controls: dict[str, Any] = field(default_factory=dict)
    preset: Any = no_update
    preset_options: Any = no_update
    reopen_options: Any = no_update

    def outputs(self) -> tuple:
        c = self.controls
        return (c.get("view", no_update), c.get("x", no_update), c.get("group", no_update),
                c.get("without", no_update), c.get("role", no_update),
                c.get("mechanism", no_update),
                c.get("compare", no_update), self.preset, self.preset_options, None,
                self.reopen_options, self.graphs, self.panel, self.message, self.row,
                self.release_label, self.release_disabled, self.note)


# ---- requests ----------------------------------------------------------------------------

def _dataset(services: Services, identity, dataset: Any):
    return services.registry.get(dataset if isinstance(dataset, str) else "",
                                 owner=identity.role is Role.OWNER)


def _requests(identity, ds, c: dict[str, Any]) -> list[ViewRequest]:
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


# ---- the role's lists (from the screen's one read) ---------------------------------------

def preset_requests(identity, ds, c: dict[str, Any]) -> list[ViewRequest | None]:
    """The request each preset would make from controls ``c`` (None: not on this dataset)."""
    out: list[ViewRequest | None] = []
    for p in PRESETS.values():
        want, _ = preset_controls(identity, p, {**c, "dataset": ds.id})
        try:
            (req,) = _requests(identity, ds, {**want, "compare": False})
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


def _look(session: Session, ds, reqs: list[ViewRequest], c: dict[str, Any]) -> ScreenRead:
    """The screen's one read: its requests, the presets' prices, the role's releases."""
    return session.look(ds, reqs, presets=preset_requests(session.identity, ds, c))


# ---- the ways to fill the screen ---------------------------------------------------------

def _released_chart(services: Services, a: ViewAnswer, rid: int | None, granted: Role,
                    index: int | str, value_range: tuple[float, float] | None = None) -> Any:
    """A stored release's chart, data table and export buttons: drawn once per app and
    release (it never changes; compared, once per shared axis range), then sent as the same
    JSON each time it is opened."""
    compact = index != "main"

    def draw() -> list:
        return [_graph(build(a, compact=compact, value_range=value_range), index, a),
                *([figure_tools(rid)] if rid is not None else [])]

    if rid is None:
        return draw()
    rendered = _RENDERED.setdefault(services.ledger, RenderCache())
    return rendered.get((rid, granted.value, index, value_range), draw)


def _released_screen(services: Services, answers: list[tuple[ViewAnswer, int | None]],
                     granted: Role) -> Screen:
    spent = sum(a.epsilon_charged for a, _ in answers)
    if len(answers) > 1:        # compared tiers share their value axis: one scale
        shared = shared_range([a for a, _ in answers])
        graphs = dbc.Row([dbc.Col(_released_chart(services, a, rid, granted, a.tier, shared),
                                  xl=4, xs=12) for a, rid in answers], className="g-2")
        panel = panels.compare_panel([a for a, _ in answers], granted)
        row = ROW + " compare"
    else:
        (a, rid), = answers
        graphs = html.Div(_released_chart(services, a, rid, granted, "main"))
        panel, row = panels.panel(a, granted), ROW
    free = all(a.cached for a, _ in answers)
    note = ("Opened free: already released to your role." if free else
            f"Released: ε {spent:.3g} spent, exactly as quoted.")
    return Screen(graphs=graphs, panel=panel, row=row, release_label="Released",
                  release_disabled=True, note=note)


def release_screen(services: Services, session: Session, ds,
                   reqs: list[ViewRequest]) -> tuple[Screen, list[StoredRelease]]:
    """Spend through the ledger's door, all or nothing (free for what the role has)."""
    answers = session.serve(ds, reqs)
    return (_released_screen(services, [(a, rid) for a, rid, _ in answers], session.role),
            [row for _, _, row in answers if row is not None])


def price_screen(services: Services, session: Session, ds, reqs: list[ViewRequest],
                 c: dict[str, Any]) -> tuple[Screen, ScreenRead]:
    """The deliberate pricing step: release the grouping's DP sizes (charged to the role,
    public from then on), then preview again with the exact price."""
    charged = session.price(ds, reqs[0])
    look = _look(session, ds, reqs, c)
    screen = preview_screen(services, session, ds, look)
    if screen.note and not screen.release_disabled:
        screen.note = (f"Priced: this grouping's DP group sizes were released to your role "
                       f"(ε {charged:.3g} from your budget, public from now on). Release "
                       "spends exactly the price shown.")
    return screen, look


def preview_screen(services: Services, session: Session, ds, look: ScreenRead) -> Screen:
    """A free preview with the release's price, from the screen's one read."""
    shown = [preview(services.releases, session.identity, r, ds, plan=p, quote=q,
                     internals=look.internals)
             for r, p, q in zip(look.requests, look.plans, look.quotes, strict=True)]
    if len(shown) > 1:
        shared = shared_range([p.answer for p in shown])
        graphs = [previews.banner(),
                  dbc.Row([dbc.Col(_graph(previews.mark(build(p.answer, compact=True,
                                                              value_range=shared)),
                                          f"preview-{i}", p.answer),
                                   xl=4, xs=12) for i, p in enumerate(shown)], className="g-2")]
        row = ROW + " compare"
    else:
        graphs = [previews.banner(), _graph(previews.mark(build(shown[0].answer)), "preview",
                                                 shown[0].answer)]
        row = ROW
    refusal = previews.refusal(shown)
    note = refusal or "Nothing spent yet: the chart is a simulated preview."
    return Screen(graphs=graphs, panel=previews.panel(shown, session.role), row=row,
                  release_label=previews.release_label(shown),
                  release_disabled=refusal is not None, note=note)


def reopen_screen(services: Services, session: Session, rel: StoredRelease,
                  status) -> Screen:
    """A stored release shown again, free (its delivery logged), controls set to it."""
    ans = replace(ViewAnswer.from_dict(rel.answer), cached=True, epsilon_charged=0.0,
                  budget_limit=status.role.limit, budget_spent=status.role.spent,
                  budget_remaining=status.role.remaining, user_limit=status.user.limit,
                  user_spent=status.user.spent, dataset_loss=status.dataset.loss,
                  dataset_cap=status.dataset.cap)
    if not access.is_owner(session.identity):
        ans = ans.without_truth()       # every field computed from true values, not one
    screen = _released_screen(services, [(ans, rel.id)], session.role)
    screen.controls = {"view": ans.view, "x": ans.x, "group": ans.group or "none",
                       "without": [g for g, why in zip(ans.groups, ans.withheld_reason or [],
                                                       strict=False) if why == LEFT_OUT],
                       "role": access.viewing_role(session.role, ans.role).value,
                       "mechanism": ans.mechanism, "compare": False}
    screen.note = f"Reopened release #{rel.id} free."
    return screen


# ---- the one screen callback -------------------------------------------------------------

def explore(services: Services, trigger: Any, preset: Any, c: dict[str, Any],
            reopen: Any = None) -> Screen:
    """The screen for the session and the submitted controls ``c`` (all untrusted).

    With an offload child (COHORT_OFFLOAD_UNCACHED=1), a screen that has to compute something
    (a preview, pricing, a fresh release) is drawn there, at a lower priority and outside this
    worker's GIL; a screen of answers the role already has is served here."""
    identity = services.identity.current()
    offload = services.releases.offload
    if offload is not None and trigger != ids.EX_REOPEN:
        try:
            ds = _computing(services, identity, trigger, preset, c)
        except Exception:            # noqa: BLE001 - e.g. the ledger unreachable: the
            log.warning("Explore screen not classified", exc_info=True)   # screen says so
            ds = None
        if ds is not None:
            try:
                return offload.call(screen_for, identity, ds.id, str(ds.version), trigger,
                                    preset, c, reopen)
            except Exception:        # noqa: BLE001 - a stale or broken child: draw it here
                log.warning("Explore screen not offloaded; drawn inline", exc_info=True)
    return screen_for(services, identity, trigger, preset, c, reopen)


def _computing(services: Services, identity, trigger: Any, preset: Any, c: dict[str, Any]):
    """The dataset if this screen computes something (a preview, pricing, a fresh release),
    else None: a bad request (its message is cheap) or answers the role has."""
    try:
        ds = _dataset(services, identity, c.get("dataset"))
        if trigger == ids.EX_DATASET:
            return ds
        if trigger == ids.EX_PRESET and isinstance(preset, str) and preset in PRESETS:
            c, _ = preset_controls(identity, PRESETS[preset], c)
        reqs = _requests(identity, ds, c)
        session = Session(services, identity)
        quotes = services.ledger.quotes([session.plan(ds, r) for r in reqs],
                                        user=identity.user)
    except DPError:
        return None
    return None if all(getattr(q, "cached", False) for q in quotes) else ds


def screen_for(services: Services, identity, trigger: Any, preset: Any, c: dict[str, Any],
               reopen: Any = None) -> Screen:
    """The screen for ``identity`` (from the session) and the untrusted controls ``c``.

    One read (``Session.look``) gives everything shown; a screen of answers the role has then
    logs its deliveries in one more transaction, a fresh release spends through the door
    (two), and the lists under the chart are the read's, brought up to date."""
    screen = Screen()
    session = Session(services, identity)
    try:
        ds = _dataset(services, identity, c.get("dataset"))
        served: set[str] = set()
        if trigger == ids.EX_REOPEN:
            rel = session.reopen(reopen, dataset_id=ds.id)
            if rel is None:
                raise DPError("That release is not one of your role's on this dataset.")
            if is_studio(rel.answer):
                raise DPError(STUDIO_TABLE.format(id=rel.id, name=query_words(rel.answer)))
            look = _look(session, ds, [], c)
            screen = reopen_screen(services, session, rel, look.status)
            screen.preset = None
        else:
            notes: list[str] = []
            if trigger == ids.EX_PRESET and isinstance(preset, str) and preset in PRESETS:
                c, notes = preset_controls(identity, PRESETS[preset], c)
            elif trigger == ids.EX_DATASET:
                c = {**c, **_columns_for(ds, c)}
            reqs = _requests(identity, ds, c)
            look = _look(session, ds, reqs, c)
            spend = trigger in (ids.EX_PRESET, ids.EX_RELEASE)
            ask = trigger == ids.EX_PRESET and not look.all_served and look.priced \
                and _asks_first(look, identity.role)
            if ask:           # a large share of what is left: the Release button confirms
                screen = preview_screen(services, session, ds, look)
                notes.append(_ask_text(PRESETS[preset].label, look))
            elif look.all_served or (spend and look.priced):
                screen, rows = release_screen(services, session, ds, reqs)
                look.mine = _with_new(look.mine, rows)
                served = {key for key, q in zip(PRESETS, look.preset_quotes, strict=True)
                          if any(_same(q, r, session, ds) for r in reqs)}
            elif trigger == ids.EX_RELEASE:
                screen, look = price_screen(services, session, ds, reqs, c)
            else:
                screen = preview_screen(services, session, ds, look)
                if spend:      # a preset whose grouping nobody priced: priced on purpose
                    need = next(q for q in look.quotes if getattr(q, "missing_inputs", ()))
                    notes.append(f"{PRESETS[preset].label} needs its grouping priced first: "
                                 f"ε {need.cost:.3g} from your budget, then its exact price "
                                 "shows and Release spends it.")
            if trigger == ids.EX_PRESET:
                screen.controls = {k: c[k] for k in CONTROLS}
                screen.message = _alert(" ".join(notes), "info") if notes else None
            else:
                if trigger == ids.EX_DATASET:
                    screen.controls = {k: c[k] for k in ("x", "group")}
                screen.preset = matching_preset(identity, preset, c)
                if len(reqs) > 1 and c.get("mechanism") == "paper":
                    screen.message = _alert(panels.COMPARE_MODE, "info")
        screen.preset_options = preset_options(look.preset_quotes, served)
        screen.reopen_options = release_options(identity.user, look.mine)
    except BudgetExceededError as exc:
        screen = Screen(message=_alert(str(exc), "danger"), preset=None)
    except DPError as exc:
        screen = Screen(message=_alert(str(exc)), preset=None)
    except Exception:  # never a 500: log for the operator, a plain message for the user
        log.exception("Explore view failed")
        screen = Screen(message=_alert(FAILED, "danger"), preset=None)
    return screen


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


def _columns_for(ds, c: dict[str, Any]) -> dict[str, Any]:
    """After a dataset switch: keep the columns if the new schema has them, else the first."""
    xs = [o["value"] for o in column_options(ds.schema)]
    groups = [o["value"] for o in group_options(ds.schema)]
    x = c.get("x") if c.get("x") in xs else (xs[0] if xs else None)
    group = c.get("group") if c.get("group") in groups and c.get("group") != x else "none"
    return {"x": x, "group": group}


# ---- exports -----------------------------------------------------------------------------

def export(services: Services, kind: str, release_id: Any):
    """The CSV or JSON report of a stored release of the session's role (else nothing)."""
    got = Session(services, services.identity.current()).export(release_id, kind)
    if got is None:
        return no_update
    name, body, media = got
    return dcc.send_string(body, name, type=media)


FOCUS_RESULT = """
function (_children, clicks, seen) {
    if (!clicks || clicks === seen) { return window.dash_clientside.no_update; }
    window.requestAnimationFrame(function () {
        const active = document.activeElement;
        const result = document.getElementById("GRAPHS_ID");
        if (result && (!active || active === document.body || active.disabled)) {
            result.focus();
        }
    });
    return clicks;
}
""".replace("GRAPHS_ID", ids.EX_GRAPHS)
"""Moves focus to the result after a Release press whose button lost it (clientside)."""


def register_callbacks(app, services: Services) -> None:
    """Bind the Explore callbacks to ``app`` (never the global dash.callback)."""

    @app.callback(
        Output(ids.EX_X, "options"), Output(ids.EX_GROUP, "options"),
        Input(ids.EX_DATASET, "value"),
    )
    def _columns(dataset):
        identity = services.identity.current()
        try:
            ds = _dataset(services, identity, dataset)
        except DPError:
            return [], []
        return column_options(ds.schema), group_options(ds.schema)

    @app.callback(
        Output(ids.EX_VIEW, "value"), Output(ids.EX_X, "value"), Output(ids.EX_GROUP, "value"),
        Output(ids.EX_WITHOUT, "value"), Output(ids.EX_ROLE, "value"),
        Output(ids.EX_MECHANISM, "value"),
        Output(ids.EX_COMPARE, "value"), Output(ids.EX_PRESET, "value"),
        Output(ids.EX_PRESET, "options"), Output(ids.EX_REOPEN, "value"),
        Output(ids.EX_REOPEN, "options"),
        Output(ids.EX_GRAPHS, "children"), Output(ids.EX_PANEL, "children"),
        Output(ids.EX_MESSAGE, "children"), Output(ids.EX_ROW, "className"),
        Output(ids.EX_RELEASE, "children"), Output(ids.EX_RELEASE, "disabled"),
        Output(ids.EX_RELEASE_NOTE, "children"),
        Input(ids.EX_PRESET, "value"), Input(ids.EX_DATASET, "value"),
        Input(ids.EX_ROLE, "value"), Input(ids.EX_VIEW, "value"), Input(ids.EX_X, "value"),
        Input(ids.EX_GROUP, "value"), Input(ids.EX_WITHOUT, "value"),
        Input(ids.EX_MECHANISM, "value"),
        Input(ids.EX_COMPARE, "value"), Input(ids.EX_RELEASE, "n_clicks"),
        Input(ids.EX_REOPEN, "value"),
    )
    def _screen(preset, dataset, role, view, x, group, without, mechanism, compare, _clicks,
                reopen):
        trigger = ctx.triggered_id
        if trigger == ids.EX_REOPEN and reopen in (None, ""):
            return (no_update,) * OUTPUTS     # the list was just reset: nothing to do
        if trigger == ids.EX_PRESET and preset in (None, ""):
            trigger = None                    # the preset was cleared: a preview
        if trigger in (ids.EX_GROUP, ids.EX_DATASET):
            without = []                      # another grouping: every group again
        controls = {"dataset": dataset, "role": role, "view": view, "x": x, "group": group,
                    "without": without if isinstance(without, list) else [],
                    "mechanism": mechanism, "compare": compare}
        screen = explore(services, trigger, preset, controls, reopen)
        if trigger in (ids.EX_GROUP, ids.EX_DATASET):
            screen.controls.setdefault("without", [])
        return screen.outputs()

    # After Release the button is disabled ("Released"), so the browser drops its focus to
    # <body>: a keyboard or screen-reader user is taken to the result instead (WCAG 2.4.3).
    app.clientside_callback(
        FOCUS_RESULT,
        Output(ids.EX_FOCUS, "data"),
        Input(ids.EX_GRAPHS, "children"),
        State(ids.EX_RELEASE, "n_clicks"), State(ids.EX_FOCUS, "data"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output(ids.EX_WITHOUT, "options"),
        Input(ids.EX_DATASET, "value"), Input(ids.EX_GROUP, "value"),
    )
    def _groups(dataset, group):
        """The groups of the chosen grouping (public categories), to leave some out."""
        identity = services.identity.current()
        try:
            ds = _dataset(services, identity, dataset)
            spec = ds.schema.column(group) if isinstance(group, str) and group != "none" \
                else None
        except DPError:
            return []
        return [] if spec is None or not spec.categories else [
            {"label": k, "value": k} for k in group_keys(spec)]

    @app.callback(
        Output(ids.EX_WITHOUT, "value", allow_duplicate=True),
        Input(ids.EX_LEAVE_OUT, "n_clicks"),
        State(ids.EX_LEAVE_OUT, "value"), State(ids.EX_WITHOUT, "value"),
        prevent_initial_call=True,
    )
    def _leave_out(clicks, name, without):
        """The panel's "Leave … out": the same view without its costliest group."""
        if not clicks or not isinstance(name, str):
            return no_update
        have = [w for w in (without or []) if isinstance(w, str)]
        return sorted({*have, name})

    @app.callback(
        Output(ids.EX_DOWNLOAD, "data"),
        Input({"type": ids.EX_CSV, "index": ALL}, "n_clicks"),
        Input({"type": ids.EX_REPORT, "index": ALL}, "n_clicks"),
        prevent_initial_call=True,
    )
    def _export(_csv, _reports):
        trigger = ctx.triggered_id
        clicked = ctx.triggered[0].get("value") if ctx.triggered else None
        if not isinstance(trigger, dict) or not clicked:
            return no_update                  # buttons just drawn, not clicked
        kind = "csv" if trigger.get("type") == ids.EX_CSV else "report"
        return export(services, kind, trigger.get("index"))
