"""Publish page (owner) and published views (audience): components only, nothing computed.

Every number drawn here comes from a stored DP answer (``ViewAnswer``) the ledger served at
the page's tier; the figures are built by layouts/components/figures.py, the same as Explore's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import dash_bootstrap_components as dbc
from dash import dcc, html

from layouts import ids
from layouts.components.accessible import field
from layouts.components.figures import build, fmt
from services.publish.records import AUDIENCE_ROLES, Page
from services.publish.service import Candidate, FigureQuote, Opened, ShownFigure

AUDIENCE_OPTIONS = [{"label": f"Every {r.label.lower()}", "value": r.value}
                    for r in AUDIENCE_ROLES] + [{"label": "One named user", "value": "user"}]


# ---- shared by the page, demo mode and the HTML export ---------------------------------------

def figure_label(fig: ShownFigure) -> str:
    """Mechanism, ε and release date of one figure, in one line."""
    a = fig.answer
    return (f"{a.mechanism_label} · ε = {fmt(a.epsilon)} · released "
            f"{fig.release.created_at:%Y-%m-%d} (release #{fig.release.id})")


def table_model(fig: ShownFigure) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the figure's data table: every DP value with its 95 % interval."""
    a = fig.answer
    unit = a.error_unit if a.figure == "histogram" else a.unit
    header = [a.x_label if a.figure == "histogram" else "Statistic",
              *[g if g else "All patients" for g in a.groups]]
    rows = []
    for c, cell in enumerate(a.cells):
        row = [str(cell)]
        for g in range(len(a.groups)):
            v, lo, hi = a.values[g][c], a.ci_low[g][c], a.ci_high[g][c]
            if v is None:
                row.append("withheld")
            else:
                row.append(f"{fmt(v)} (95 % interval {fmt(lo)} – {fmt(hi)})"
                           + (f" {unit}" if unit else ""))
        rows.append(row)
    return header, rows


def total_text(opened: Opened) -> str:
    return (f"Total privacy cost of this page: ε = {fmt(opened.total_epsilon)}, charged once to "
            f"the {opened.page.tier_role.label.lower()} budget when its figures were released. "
            "Opening, presenting or exporting it costs nothing.")


# ---- audience -------------------------------------------------------------------------------

def not_found(message: str) -> dbc.Alert:
    return dbc.Alert(message, color="warning", id=ids.VIEW_PAGE)


def closed(opened: Opened) -> dbc.Alert:
    return dbc.Alert([html.H1(opened.page.title, className="h5"), opened.message],
                     color="secondary", id=ids.VIEW_PAGE)


def _data_table(fig: ShownFigure) -> dbc.Table:
    header, rows = table_model(fig)
    return dbc.Table([html.Thead(html.Tr([html.Th(h, scope="col") for h in header])),
                      html.Tbody([html.Tr([html.Th(r[0], scope="row"),
                                           *[html.Td(c) for c in r[1:]]]) for r in rows])],
                     size="sm", bordered=True, responsive=True, className="small data-table")


def _figure_card(fig: ShownFigure, n: int, config: dict[str, Any]) -> dbc.Card:
    return dbc.Card(dbc.CardBody([
        html.H2(fig.ref.caption or f"Figure {n + 1}", className="h6"),
        dcc.Graph(id={"type": ids.VIEW_FIGURE, "index": n}, figure=build(fig.answer),
                  config=config, className="dp-graph"),
        html.P(figure_label(fig), className="small text-muted mb-1 figure-label"),
        html.Details([html.Summary("Data table", className="small"), _data_table(fig)],
                     open=True),
    ]), className="mb-3 published-figure")


def view_page(opened: Opened, config: dict[str, Any]) -> html.Div:
    """The read-only page: figures, their labels and tables, the total cost; no spending."""
    p = opened.page
    base = f"/views/{p.slug}"
    return html.Div([
        html.H1(p.title, className="h4"),
        html.P(f"For {p.audience.label.lower() if p.audience.kind == 'role' else p.audience.label}"
               f" · {p.tier_role.label.lower()} noise tier · open until "
               f"{p.expires_at:%Y-%m-%d %H:%M} UTC", className="small text-muted"),
        dbc.Alert(total_text(opened), color="info", className="py-2", id=ids.VIEW_TOTAL),
        html.Div([
            dcc.Link("Demo mode", href=base + "/demo", className="btn btn-outline-primary btn-sm"),
            html.A("Download HTML", href=base + "/export.html",
                   className="btn btn-outline-secondary btn-sm"),
            html.A("Release reports (JSON)", href=base + "/reports.json",
                   className="btn btn-outline-secondary btn-sm"),
        ], className="d-flex gap-2 mb-3"),
        *[_figure_card(f, n, config) for n, f in enumerate(opened.figures)],
    ], id=ids.VIEW_PAGE)


def demo_deck(opened: Opened, config: dict[str, Any]) -> html.Div:
    """Full screen, large fonts, one figure at a time; ArrowLeft / ArrowRight step through
    (assets/publish-demo.js)."""
    n_figs = len(opened.figures)
    slides = []
    for n, fig in enumerate(opened.figures):
        figure = build(fig.answer)
        figure["layout"] = {**figure["layout"], "font": {**figure["layout"]["font"], "size": 20},
                            "autosize": True}
        slides.append(html.Section([
            html.H2(fig.ref.caption or opened.page.title, className="demo-caption"),
            dcc.Graph(id={"type": ids.VIEW_FIGURE, "index": n}, figure=figure,
                      config={**config, "displayModeBar": False}, className="demo-graph",
                      responsive=True),
            html.P(figure_label(fig), className="demo-label"),
        ], className="demo-slide" + (" active" if n == 0 else ""),
            **{"aria-label": f"Figure {n + 1} of {n_figs}", "aria-hidden": str(n != 0).lower()}))
    return html.Div([
        html.Div([html.Span(opened.page.title, className="demo-title"),
                  html.Span(f"1 / {n_figs}", className="demo-counter", **{"aria-live": "polite"}),
                  html.Span("← → to step · Esc leaves", className="demo-hint"),
                  dcc.Link("Leave demo", href=f"/views/{opened.page.slug}",
                           className="demo-leave")], className="demo-bar"),
        html.Div(slides, className="demo-stage"),
        html.P(total_text(opened), className="demo-total"),
    ], id=ids.DEMO_DECK, className="demo-deck", tabIndex="0")


# ---- owner ----------------------------------------------------------------------------------

def publish_page(datasets: Sequence[tuple[str, str]], pages: Sequence[Page],
                 default_expiry: date) -> html.Div:
    """The owner's Publish page: build a page from released views, list and withdraw pages."""
    first = datasets[0][0] if datasets else None
    form = dbc.Card(dbc.CardBody([
        html.H2("New published page", className="h5"),
        field("Dataset",
              dcc.Dropdown(id=ids.PUB_DATASET,
                           options=[{"label": t, "value": i} for i, t in datasets],
                           value=first, clearable=False), class_name="mb-2"),
        field("Title",
              dbc.Input(id=ids.PUB_TITLE, type="text", maxLength=200,
                        placeholder="e.g. Age and PI-RADS, spring partner review"),
              class_name="mb-2"),
        field("Audience",
              dbc.RadioItems(id=ids.PUB_AUDIENCE, options=AUDIENCE_OPTIONS,
                             value="third_party", inline=True), class_name="mb-1"),
        field("User name (for one named user)",
              dbc.Input(id=ids.PUB_USER, type="text", maxLength=200,
                        placeholder="user name"), class_name="mb-2"),
        field("Open until (UTC, end of day)",
              dbc.Input(id=ids.PUB_EXPIRES, type="date", value=default_expiry.isoformat()),
              class_name="mb-2"),
        field("Figures (released views of the dataset, and the paper's presets)",
              dbc.Checklist(id=ids.PUB_FIGURES, options=[], value=[]), class_name="mb-2"),
        html.Div(id=ids.PUB_SELECTED, className="mt-2"),
        dbc.Button("Check the cost", id=ids.PUB_QUOTE, color="secondary", className="mt-2"),
        html.Div(id=ids.PUB_QUOTE_OUT, className="mt-2"),
        dcc.Store(id=ids.PUB_QUOTED),
        dbc.Button("Publish", id=ids.PUB_CONFIRM, color="primary", disabled=True,
                   className="mt-1"),
        html.Div(id=ids.PUB_MESSAGE, className="mt-2"),
    ]))
    return html.Div([
        html.H1("Publish", className="h4"),
        html.P("A published page shows figures that were already released at its audience's "
               "noise tier. Partners open it as often as they like at no further privacy cost; "
               "a figure the audience's role does not hold yet is released once, through the "
               "ledger, at the cost shown before you confirm.", className="small"),
        dbc.Row([dbc.Col(form, lg=6), dbc.Col(html.Div(page_list(pages), id=ids.PUB_LIST),
                                              lg=6)]),
    ])


NOT_RELEASED = " (not released yet)"


def candidate_options(cands: Sequence[Candidate]) -> list[dict[str, str]]:
    return [{"label": c.label + ("" if c.released else NOT_RELEASED), "value": c.key}
            for c in cands]


def selected_rows(picked: Sequence[tuple[str, str]]) -> html.Div:
    """Caption and position inputs for each picked figure (key, label)."""
    if not picked:
        return html.Div()
    picked = [(key, label.removesuffix(NOT_RELEASED)) for key, label in picked]
    rows = [html.Tr([
        html.Td(html.Label([html.Span(f"Position of {label}", className="visually-hidden"),
                            dbc.Input(id={"type": ids.PUB_ORDER, "index": key}, type="number",
                                      min=1, max=len(picked), step=1, value=n + 1, size="sm",
                                      style={"width": "4.5rem"})])),
        html.Td(label, className="small"),
        html.Td(html.Label([html.Span(f"Caption of {label}", className="visually-hidden"),
                            dbc.Input(id={"type": ids.PUB_CAPTION, "index": key}, type="text",
                                      value=label, maxLength=500, size="sm")],
                           className="w-100")),
    ]) for n, (key, label) in enumerate(picked)]
    return dbc.Table([html.Thead(html.Tr([html.Th("Order"), html.Th("View"),
                                          html.Th("Caption")])), html.Tbody(rows)],
                     size="sm", className="mb-0")


def quote_table(quotes: Sequence[FigureQuote], role_label: str) -> html.Div:
    total = sum(q.cost for q in quotes)
    rows = [html.Tr([html.Td(q.label),
                     html.Td("already released — free" if q.cached else f"ε {fmt(q.cost)}"),
                     html.Td(q.refusal or "")]) for q in quotes]
    return html.Div([
        dbc.Table([html.Thead(html.Tr([html.Th("Figure"), html.Th("Cost now"), html.Th("")])),
                   html.Tbody(rows)], size="sm", className="mb-1"),
        html.P(f"Publishing charges ε {fmt(total)} to the {role_label.lower()} budget "
               "(figures it does not hold yet are released once); opening the page later "
               "costs nothing. Press Publish to confirm.", className="small fw-bold"),
    ])


def page_list(pages: Sequence[Page]) -> html.Div:
    if not pages:
        return html.Div([html.H2("Published pages", className="h5"),
                         html.P("No page published yet.", className="small text-muted")])
    rows = []
    for p in pages:
        state = "withdrawn" if p.withdrawn else f"until {p.expires_at:%Y-%m-%d}"
        rows.append(html.Tr([
            html.Td(dcc.Link(p.title, href=f"/views/{p.slug}")),
            html.Td(p.audience.label),
            html.Td(state),
            html.Td("" if p.withdrawn else dbc.Button(
                "Withdraw", id={"type": ids.PUB_WITHDRAW, "index": p.slug}, color="link",
                size="sm", className="p-0")),
        ]))
    return html.Div([html.H2("Published pages", className="h5"),
                     dbc.Table([html.Thead(html.Tr([html.Th("Page"), html.Th("Audience"),
                                                    html.Th("Open"), html.Th("")])),
                                html.Tbody(rows)], size="sm")])
