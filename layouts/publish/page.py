"""The owner's Publish page: components only, nothing computed.

The owner builds a page from released views, sees in plain words what its audience can afford
(and what to do when it cannot), writes the cohort description every page of a dataset shows,
and lists or withdraws pages. The audience's view is ``layouts/publish/view.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import dash_bootstrap_components as dbc
from dash import dcc, html

from layouts import ids
from layouts.components.accessible import field
from layouts.components.figures import fmt
from services.publish.cohort import LIMITS
from services.publish.records import AUDIENCE_ROLES, Cohort, Page
from services.publish.service import Candidate, FigureQuote, PageQuote

AUDIENCE_OPTIONS = [{"label": f"Every {r.label.lower()}", "value": r.value}
                    for r in AUDIENCE_ROLES] + [{"label": "One named user", "value": "user"}]


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
        dbc.Row([dbc.Col(form, lg=6),
                  dbc.Col([cohort_form(), html.Div(page_list(pages), id=ids.PUB_LIST)],
                          lg=6)]),
    ])


def cohort_form() -> dbc.Card:
    """The cohort description of the chosen dataset (loaded when the dataset changes)."""
    return dbc.Card(dbc.CardBody([
        html.H2("Cohort description", className="h5"),
        html.P("Shown at the top of every published page of the chosen dataset, "
               "beside its differentially private number of records. Write it in words; "
               "never paste patient data: every reader of the page sees it.",
               className="small"),
        field("Period", dbc.Input(id=ids.PUB_COHORT_PERIOD, type="text",
                                  maxLength=LIMITS["period"],
                                  placeholder="e.g. MRI reports of 2017 and 2018"),
              class_name="mb-2"),
        field("Inclusion criteria",
              dbc.Textarea(id=ids.PUB_COHORT_INCLUSION, maxLength=LIMITS["inclusion"], rows=3,
                           placeholder="e.g. men referred for a prostate MRI, aged 18 or "
                                       "over"), class_name="mb-2"),
        field("Source", dbc.Input(id=ids.PUB_COHORT_SOURCE, type="text",
                                  maxLength=LIMITS["source"],
                                  placeholder="e.g. radiology information system, "
                                              "University Hospital X"),
              class_name="mb-2"),
        dbc.Button("Save the description", id=ids.PUB_COHORT_SAVE, color="secondary"),
        html.Div(id=ids.PUB_COHORT_MESSAGE, className="mt-2", role="status"),
    ]), className="mb-3")


def cohort_values(cohort: Cohort | None) -> tuple[str, str, str]:
    """The form's values for ``cohort`` (empty fields when none was written)."""
    if cohort is None:
        return "", "", ""
    return cohort.period, cohort.inclusion, cohort.source


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


def _figure_note(q: FigureQuote, page: PageQuote) -> str:
    if page.remaining is not None and not q.cached and q.cost > page.remaining + 1e-12:
        return f"costs more than the ε {fmt(page.remaining)} left on its own"
    if q.refusal and not q.cached:
        return q.refusal
    if q.all_withheld:
        return ("every group withheld at this tier (too few patients): the page shows a "
                "sentence instead of a chart")
    if q.withheld:
        return f"withheld at this tier (too few patients): {', '.join(q.withheld)}"
    return ""


def _budget_words(q: PageQuote) -> str:
    role = q.role.label.lower()
    if q.limited_by == "user":
        return f"the named user's own limit inside the {role} budget on '{q.dataset_title}'"
    return f"the {role} budget on '{q.dataset_title}'"


def quote_summary(q: PageQuote) -> list:
    """What the audience can afford and what to do, in plain sentences (with the remedy: the
    owner's budget controls on the Ledger page)."""
    total, n = q.total, len(q.figures)
    budget = _budget_words(q)
    remedy = ["raise ", budget, " with the budget controls on the ",
              dcc.Link("Ledger page", href="/ledger"), " (Budget settings)"]
    if q.refusals:
        reasons = "; ".join(f"'{label}': {why}" for label, why in q.refusals)
        return [html.P(f"Publish stays off: {reasons}", className="fw-bold mb-1"),
                html.P(["Take those figures off the page, or ", *remedy, "."], className="mb-0")]
    if q.unaffordable:
        drop = q.most_expensive(q.unaffordable)
        names = ", ".join(f"'{d.label}' (ε {fmt(d.cost)})" for d in drop)
        left = f"ε {fmt(q.remaining)} left" + (f" of ε {fmt(q.limit)}" if q.limit else "")
        return [html.P(f"This audience cannot afford {q.unaffordable} of these {n} figures: "
                       f"together they cost ε {fmt(total)}, and {budget} has {left}. "
                       "Publish stays off until the page fits.", className="fw-bold mb-1"),
                html.P([f"Take off {q.unaffordable} figure{'s' if q.unaffordable > 1 else ''}"
                        f" (the most expensive: {names}), or ", *remedy, "."],
                       className="mb-0")]
    if q.remaining is None:
        afford = f"{budget[:1].upper() + budget[1:]} has no limit."
    else:
        afford = (f"The audience can afford it: {budget} has ε {fmt(q.remaining)} left, "
                  f"ε {fmt(max(q.remaining - total, 0.0))} after publishing.")
    return [html.P(f"Publishing charges ε {fmt(total)} to the {q.role.label.lower()} budget "
                   "(figures it does not hold yet are released once); opening the page later "
                   f"costs nothing. {afford}", className="fw-bold mb-1"),
            html.P("Press Publish to publish the page.", className="mb-0")]


def quote_table(q: PageQuote) -> html.Div:
    rows = [html.Tr([html.Td(f.label),
                     html.Td("already released — free" if f.cached else f"ε {fmt(f.cost)}"),
                     html.Td(_figure_note(f, q))]) for f in q.figures]
    return html.Div([
        dbc.Table([html.Thead(html.Tr([html.Th("Figure"), html.Th("Cost now"),
                                       html.Th("Note")])),
                   html.Tbody(rows)], size="sm", className="mb-1"),
        html.Div(quote_summary(q), className="small", role="status"),
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
