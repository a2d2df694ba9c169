"""The published view ``/views/<slug>`` and its demo: components only, nothing computed.

Every number drawn here comes from a stored DP answer (``ViewAnswer``) the ledger served at
the page's tier; the figures are built by layouts/components/figures.py, the same as Explore's,
then fitted to a page that is read on any screen (``published_figure``: the chart's title and
caption become text above and below it, so they wrap instead of being clipped). The words
(methods note, withheld figures, small counts) come from ``services.publish.methods``.
"""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import dcc, html

from layouts import ids
from layouts.components.accessible import data_table
from layouts.components.figures import build, caption, fmt
from services.publish import methods
from services.publish.service import Opened, ShownFigure
from services.views.answer import ViewAnswer

GAP_FILL = "#fff4e5"          # the fill of figures.py's withheld-group labels
DEMO_FONT = 18
SUMMARY_PARAGRAPHS = 3        # methods paragraphs on the demo's first slide


# ---- shared by the page, demo mode and the HTML export ---------------------------------------

QUANTILES = {"q0.05": "5th percentile", "q0.25": "25th percentile", "q0.5": "Median",
             "q0.75": "75th percentile", "q0.95": "95th percentile"}
"""A box plot's cells in words (the CSV keeps their names)."""


def figure_label(fig: ShownFigure) -> str:
    """Mechanism, ε and release date of one figure, in one line."""
    a = fig.answer
    cost = ("no group released (ε 0)" if methods.all_withheld(a)
            else f"ε = {fmt(a.epsilon)}")
    return (f"{a.mechanism_label} · {cost} · released "
            f"{fig.release.created_at:%Y-%m-%d} (release #{fig.release.id})")


def table_model(fig: ShownFigure) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the figure's data table: every DP value with its 95 % interval,
    then each group's ε."""
    a = fig.answer
    unit = a.error_unit if a.figure == "histogram" else a.unit
    header = [a.x_label if a.figure == "histogram" else "Statistic",
              *[g if g else "All patients" for g in a.groups]]
    rows = []
    for c, cell in enumerate(a.cells):
        row = [QUANTILES.get(str(cell), str(cell)) if a.figure == "box" else str(cell)]
        for g in range(len(a.groups)):
            v, lo, hi = a.values[g][c], a.ci_low[g][c], a.ci_high[g][c]
            if v is None:
                row.append("withheld")
            else:
                row.append(f"{fmt(v)} (95 % interval {fmt(lo)} – {fmt(hi)})"
                           + (f" {unit}" if unit else ""))
        rows.append(row)
    if a.dp and a.group_epsilon:
        rows.append(["ε of the group", *["withheld" if e is None else fmt(e)
                                         for e in a.group_epsilon]])
    return header, rows


def total_text(opened: Opened) -> str:
    return (f"Total privacy cost of this page: ε = {fmt(opened.total_epsilon)}, charged once to "
            f"the {opened.page.tier_role.label.lower()} budget when its figures were released. "
            "Opening, presenting or exporting it costs nothing.")


def chart_title(ans: ViewAnswer) -> str:
    """The figure's own title (what is counted, by what), without its subtitle."""
    title = build(ans)["layout"].get("title", {}).get("text", "")
    return str(title).split("<br>")[0]


def published_figure(ans: ViewAnswer, *, demo: bool = False) -> dict[str, Any]:
    """The figure of ``ans`` for a published page: its title and caption removed (the page
    shows them as text), the legend above the plot, a withheld group's gap labelled with one
    word (the reason is written under the chart)."""
    figure = build(ans)
    layout = dict(figure["layout"])
    layout.pop("height", None)     # the page's box sizes the chart (440 px, 380 on a phone)
    notes = [dict(a, text="withheld") for a in layout.get("annotations", [])
             if a.get("bgcolor") == GAP_FILL and a.get("xref") != "paper"]
    layout.update(
        title={"text": ""}, annotations=notes, autosize=True,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        legend={**layout.get("legend", {}), "orientation": "h", "x": 0, "xanchor": "left",
                "y": 1.02, "yanchor": "bottom"},
    )
    if demo:
        layout["font"] = {**layout["font"], "size": DEMO_FONT}
    data = []
    for trace in figure["data"]:
        name = str(trace.get("name", ""))
        if name.endswith(")") and "(withheld:" in name:
            trace = {**trace, "name": name.split(" (withheld:")[0] + " (withheld)"}
        data.append(trace)
    return {"data": data, "layout": layout}


def figure_notes(ans: ViewAnswer) -> list[str]:
    """What the chart's marks mean, its withheld groups and its small counts, in words."""
    if not ans.dp:
        return [caption(ans)]
    notes = [("The diamond is the median with its 95 % interval; the box spans the 25th to "
              "75th percentile, the whiskers the 5th to 95th (all DP numbers)."
              if ans.figure == "box" else "Error bars: the 95 % interval of each DP value.")]
    for extra in (methods.partly_withheld_sentence(ans), methods.small_counts_note(ans)):
        if extra:
            notes.append(extra)
    return notes


def cohort_rows(opened: Opened) -> list[tuple[str, str]]:
    """(term, text) lines of the cohort description: the dataset, n̂ as released, and the
    owner's period, inclusion criteria and source."""
    rows = [("Dataset", opened.dataset_title)]
    if opened.n_hat is not None:
        rows.append(("Records", f"about {opened.n_hat:,} (a differentially private count; "
                                "the exact number is not disclosed)"))
    c = opened.cohort
    if c is not None:
        rows += [(term, text) for term, text in (("Period", c.period),
                                                  ("Inclusion criteria", c.inclusion),
                                                  ("Source", c.source)) if text]
    return rows


def methods_paragraphs(opened: Opened) -> list[methods.Paragraph]:
    return methods.methods_note([f.answer for f in opened.figures],
                                total_epsilon=opened.total_epsilon,
                                budget_role=opened.page.tier_role.label.lower())


# ---- audience -------------------------------------------------------------------------------

def not_found(message: str) -> dbc.Alert:
    return dbc.Alert(message, color="warning", id=ids.VIEW_PAGE)


def closed(opened: Opened) -> dbc.Alert:
    return dbc.Alert([html.H1(opened.page.title, className="h5"), opened.message],
                     color="secondary", id=ids.VIEW_PAGE)


def _lines(text: str) -> list:
    """Text with its line breaks kept (the owner's inclusion criteria)."""
    parts: list = []
    for n, line in enumerate(text.split("\n")):
        parts += ([html.Br()] if n else []) + [line]
    return parts


def _cohort_list(opened: Opened, class_name: str) -> html.Dl:
    return html.Dl([item for term, text in cohort_rows(opened)
                    for item in (html.Dt(term), html.Dd(_lines(text)))], className=class_name)


def cohort_section(opened: Opened) -> html.Section:
    body: list = [html.H2("The cohort", className="h5"), _cohort_list(opened, "cohort-list mb-1")]
    if opened.cohort is None or opened.cohort.empty:
        body.append(html.P("The data owner has not described the cohort's period, inclusion "
                           "criteria and source yet.", className="small text-muted mb-0"))
    return html.Section(body, id=ids.VIEW_COHORT, className="published-block",
                        **{"aria-label": "The cohort"})


def methods_section(opened: Opened) -> html.Section:
    paragraphs = methods_paragraphs(opened)
    definition = methods.error_definition([f.answer for f in opened.figures])
    body: list = [html.H2("How to read these numbers", className="h5")]
    body += [html.P([html.Strong(p.heading + ". "), p.text], className="small")
             for p in paragraphs]
    if definition:
        body.append(html.Details([html.Summary("The exact definition of relative error",
                                               className="small"),
                                  html.P(definition, className="small")]))
    return html.Section(body, id=ids.VIEW_METHODS, className="published-block",
                        **{"aria-label": "How to read these numbers"})


def _figure_card(fig: ShownFigure, n: int, config: dict[str, Any]) -> dbc.Card:
    a = fig.answer
    head = [html.H2(fig.ref.caption or f"Figure {n + 1}", className="h5"),
            html.P(chart_title(a), className="figure-title")]
    sentence = methods.withheld_sentence(a)
    if sentence:
        return dbc.Card(dbc.CardBody([
            *head, html.P(sentence, className="withheld-figure"),
            html.P(figure_label(fig), className="small text-muted mb-0 figure-label"),
        ]), className="mb-3 published-figure withheld")
    return dbc.Card(dbc.CardBody([
        *head,
        dcc.Graph(id={"type": ids.VIEW_FIGURE, "index": n}, figure=published_figure(a),
                  config=config, className="dp-graph published-graph", responsive=True),
        *[html.P(text, className="small figure-note") for text in figure_notes(a)],
        html.P(figure_label(fig), className="small text-muted mb-1 figure-label"),
        html.Details([html.Summary("Data table", className="small"), data_table(table_model(fig))],
                     open=True),
    ]), className="mb-3 published-figure")


def view_page(opened: Opened, config: dict[str, Any]) -> html.Div:
    """The read-only page: the cohort, how to read it, the figures with their labels, notes
    and tables, the total cost and the exports; no spending."""
    p = opened.page
    base = f"/views/{p.slug}"
    audience = p.audience.label.lower() if p.audience.kind == "role" else p.audience.label
    return html.Div([
        html.H1(p.title, className="h4"),
        html.P(f"For {audience} · {p.tier_role.label.lower()} noise tier · open until "
               f"{p.expires_at:%Y-%m-%d %H:%M} UTC", className="small text-muted"),
        dbc.Row([dbc.Col(cohort_section(opened), lg=5, className="mb-3"),
                 dbc.Col(methods_section(opened), lg=7, className="mb-3")]),
        dbc.Alert(total_text(opened), color="info", className="py-2", id=ids.VIEW_TOTAL),
        html.Div([
            dcc.Link("Demo mode", href=base + "/demo", className="btn btn-dark btn-sm"),
            html.A("Download CSV (every figure)", href=base + "/page.csv",
                   className="btn btn-outline-dark btn-sm"),
            html.A("Download HTML", href=base + "/export.html",
                   className="btn btn-outline-dark btn-sm"),
            html.A("Release reports and scripts (JSON)", href=base + "/reports.json",
                   className="btn btn-outline-dark btn-sm"),
        ], className="d-flex flex-wrap gap-2 mb-3 published-exports"),
        *[_figure_card(f, n, config) for n, f in enumerate(opened.figures)],
    ], id=ids.VIEW_PAGE, className="published-page")


def _about_slide(opened: Opened) -> list:
    """The demo's first slide: the cohort and how to read the figures, in short."""
    paragraphs = methods_paragraphs(opened)[:SUMMARY_PARAGRAPHS]
    return [
        html.H2("About these figures", className="demo-caption"),
        _cohort_list(opened, "demo-cohort"),
        *[html.P([html.Strong(p.heading + ". "), p.text], className="demo-note")
          for p in paragraphs],
    ]


def _demo_slide(fig: ShownFigure, n: int, config: dict[str, Any]) -> list:
    a = fig.answer
    sentence = methods.withheld_sentence(a)
    head = [html.H2(fig.ref.caption or f"Figure {n + 1}", className="demo-caption"),
            html.P(chart_title(a), className="demo-figure-title")]
    if sentence:
        body = [html.P(sentence, className="withheld-figure demo-withheld")]
    else:
        body = [dcc.Graph(id={"type": ids.VIEW_FIGURE, "index": n},
                          figure=published_figure(a, demo=True),
                          config={**config, "displayModeBar": False},
                          className="demo-graph", responsive=True),
                *[html.P(t, className="demo-note") for t in figure_notes(a)[1:]]]
    return [*head, *body, html.P(figure_label(fig), className="demo-label")]


def demo_deck(opened: Opened, config: dict[str, Any]) -> html.Div:
    """Full screen, large type, one slide at a time (the cohort first, then each figure);
    ArrowLeft / ArrowRight step through (assets/publish-demo.js)."""
    contents = [_about_slide(opened),
                *[_demo_slide(f, n, config) for n, f in enumerate(opened.figures)]]
    total = len(contents)
    slides = [html.Section(body, className="demo-slide" + (" active" if n == 0 else ""),
                           **{"aria-label": f"Slide {n + 1} of {total}",
                              "aria-hidden": str(n != 0).lower()})
              for n, body in enumerate(contents)]
    return html.Div([
        html.Div([html.Span(opened.page.title, className="demo-title"),
                  html.Span(f"1 / {total}", className="demo-counter", **{"aria-live": "polite"}),
                  html.Span("← → to step · Esc leaves", className="demo-hint"),
                  dcc.Link("Leave demo", href=f"/views/{opened.page.slug}",
                           className="demo-leave")], className="demo-bar"),
        html.Div(slides, className="demo-stage"),
        html.P(total_text(opened), className="demo-total"),
    ], id=ids.DEMO_DECK, className="demo-deck", tabIndex="0")
