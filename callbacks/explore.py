"""Explore-page callbacks: preview for free, release on purpose, reopen free, export.

One callback owns the screen, so it always matches the controls: changing a control shows a
free preview (or opens a view already released to the role, free); the Release button and a
preset spend through the ledger's door; choosing an item of "My releases" reopens it free and
sets the controls to it. What the screen shows is computed as data by
``services.views.screen`` (on the runner when it computes something); this module draws it.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from typing import Any

import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

from callbacks.guard import Page
from dp_engine.errors import DPError
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
from services.runner import no_progress
from services.session import Session
from services.views.answer import ViewAnswer
from services.views.screen import (
    DATASET,
    KEEP,
    PRESET,
    RELEASE,
    REOPEN,
    Computes,
    ScreenData,
    dataset_for,
    on_runner,
    screen_data,
)
from services.views.statistics import group_keys

log = logging.getLogger(__name__)
ROW = "explore-row"
OUTPUTS = 18
_RENDERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Each app's drawn stored releases (``layouts/explore/rendered.py``), keyed by its ledger."""


def page_view(services: Services, identity, _path: str = "/"):
    """The Explore page over the datasets ``identity`` may query."""
    return page.layout(access.queryable(identity, services.registry.list()), identity)


PAGE = Page("explore", "/", "Explore", Role.THIRD_PARTY, page_view)
FAILED = ("This view could not be computed. Nothing was charged and your data and budget are "
          "unchanged; try another view or contact the data owner.")


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


# ---- drawing a screen from its data ------------------------------------------------------

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


def _preview_screen(shown: list, granted: Role) -> Screen:
    """Free previews with the release's price."""
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
    return Screen(graphs=graphs, panel=previews.panel(shown, granted), row=row,
                  release_label=previews.release_label(shown),
                  release_disabled=refusal is not None, note=note)


def render(services: Services, identity, data: ScreenData) -> Screen:
    """The components of a screen from its data (the session work returns no component)."""
    if data.kind == "preview":
        screen = _preview_screen(data.previews, identity.role)
        if data.priced is not None and not screen.release_disabled:
            screen.note = (f"Priced: this grouping's DP group sizes were released to your "
                           f"role (ε {data.priced:.3g} from your budget, public from now on). "
                           "Release spends exactly the price shown.")
    elif data.kind == "released":
        screen = _released_screen(services, data.answers, identity.role)
        if data.note:
            screen.note = data.note
    else:
        screen = Screen()
    screen.controls = data.controls
    screen.message = _alert(data.message, data.colour) if data.message else None
    if data.compare_paper and not data.message:
        screen.message = _alert(panels.COMPARE_MODE, "info")
    screen.preset = no_update if data.preset == KEEP else data.preset
    if data.preset_options is not None:
        screen.preset_options = data.preset_options
    if data.mine is not None:
        screen.reopen_options = release_options(identity.user, data.mine)
    return screen


# ---- the one screen callback -------------------------------------------------------------

ACTIONS = {ids.EX_PRESET: PRESET, ids.EX_DATASET: DATASET, ids.EX_RELEASE: RELEASE,
           ids.EX_REOPEN: REOPEN}


def explore(services: Services, trigger: Any, preset: Any, c: dict[str, Any],
            reopen: Any = None) -> Screen:
    """The screen for the session and the submitted controls ``c`` (all untrusted).

    With runner processes, the screen is read here: answers the role already has are served
    here (one read, one delivery log), a fresh release goes to a lower-priority child as the
    door's work alone, and any other screen that computes (a preview, pricing, a costly plan)
    is the child's whole work. Inline, the runner's work is this very call."""
    identity = services.identity.current()
    action = ACTIONS.get(trigger)
    try:
        if services.runner.in_process:
            data = services.runner.call(screen_data, identity, action, preset, c, reopen)
        else:
            try:
                data = screen_data(services, no_progress, identity, action, preset, c, reopen,
                                   cached_only=True)
            except Computes:
                data = on_runner(services, identity, action, preset, c, reopen)
            except Exception:      # noqa: BLE001 - e.g. the ledger unreachable for a moment:
                log.warning("Explore screen not read here; the runner draws it",  # the
                            exc_info=True)                          # runner's screen says so
                data = on_runner(services, identity, action, preset, c, reopen)
    except Exception:  # never a 500: log for the operator, a plain message for the user
        log.exception("Explore view failed")
        return Screen(message=_alert(FAILED, "danger"), preset=None)
    return render(services, identity, data)


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
            ds = dataset_for(services, identity, dataset)
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
            ds = dataset_for(services, identity, dataset)
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
