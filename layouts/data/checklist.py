"""The Data page's checklist: what becomes public, one tick per kind of decision.

Each kind (bounds read from the data, category lists, code labels, who is a patient, clinical
defaults, yes/no columns, hidden columns) lists its columns with what becomes public and,
for the owner only, what that does to the data. Kinds read off the data carry one tick each
(``services/data/decisions.py``); the patient decision has its column, k and tick here too.
"""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import dcc, html

from layouts import ids
from layouts.components.accessible import field
from services.data import decisions as dec
from services.data.decisions import Decision

ROW_UNIT = "__row__"  # the patient dropdown's "each row is one patient"
HEADERS = ("Column", "Becomes public", "What it does to your data (only you see this)")


def decision_id(key: str) -> dict[str, str]:
    return {"type": ids.DATA_DECISION, "key": key}


def _entries(d: Decision) -> html.Div | dbc.Table:
    """The columns of one decision: a table, or one line when they all say the same."""
    publics = {e.public for e in d.entries}
    if len(d.entries) > 1 and len(publics) == 1 and not any(e.effect for e in d.entries):
        return html.P([html.Span("Columns: ", className="fw-semibold"),
                       ", ".join(d.columns), html.Br(),
                       html.Span("Becomes public: ", className="fw-semibold"), publics.pop()],
                      className="small mb-0")
    head = html.Thead(html.Tr([html.Th(h, scope="col") for h in HEADERS]))
    body = html.Tbody([html.Tr([html.Th(e.column, scope="row", className="fw-normal"),
                                html.Td(e.public), html.Td(e.effect)]) for e in d.entries])
    return dbc.Table([head, body], size="sm", bordered=False, responsive=True,
                     className="small mb-0 data-decision-table")


def _title(d: Decision) -> html.Div:
    if d.asks:
        return dbc.Checklist(id=decision_id(d.key),
                             options=[{"label": d.title, "value": d.token}], value=[],
                             class_name="fw-semibold mb-0")
    return html.P([html.Span("✓ ", **{"aria-hidden": "true"}), d.title],
                  className="fw-semibold mb-0")


def decision_card(d: Decision, merge: bool) -> html.Div:
    """One kind of decision: its tick (or a check mark), what it means, what becomes public."""
    parts = [_title(d), html.P(d.hint, className="small text-body-secondary mb-1"), _entries(d)]
    if merge:
        parts.append(dbc.Checklist(id=decision_id(dec.MERGE),
                                   options=[{"label": dec.MERGE_LABEL, "value": dec.MERGE}],
                                   value=[dec.MERGE], class_name="small mt-1"))
    border = "border-warning" if d.asks else "border-light-subtle"
    return html.Div(parts, className=f"border rounded p-2 mb-2 {border}")


def patient_options(dataset) -> list[dict[str, str]]:
    """"Each row is one patient", then the columns that may identify a patient."""
    review = dataset.load_report.review if dataset else None
    names = list(review.candidates) if review is not None else []
    column = dataset.schema.patient_column if dataset else None
    if column and column not in names:
        names.insert(0, column)
    return [{"label": "Each row is one patient", "value": ROW_UNIT},
            *({"label": f"Patients are identified by '{n}'", "value": n} for n in names)]


def patient_card(dataset, d: Decision | None) -> html.Div:
    """Who is a patient, and k: inside the checklist, with its own tick when k was read off
    the data."""
    schema = dataset.schema if dataset else None
    column = (schema.patient_column if schema else None) or ROW_UNIT
    k = schema.max_rows_per_patient if schema else 1
    asks = bool(d and d.asks)
    lines = dataset.load_report.review.unit_lines(schema) if (
        dataset and dataset.load_report.review is not None) else []
    tick = dbc.Checkbox(id=ids.DATA_PATIENT_K_CONFIRM, value=False,
                        label=f"I confirm k = {k} rows per patient (read from the data)",
                        class_name="fw-semibold" if asks else "d-none")
    title = d.title if d else "Each row is one patient"
    return html.Div([
        html.P(title, className="fw-semibold mb-1"),
        html.P(d.hint if d else "", className="small text-body-secondary mb-1"),
        dbc.Row([
            dbc.Col(field("Who is a patient?",
                          dcc.Dropdown(id=ids.DATA_PATIENT, options=patient_options(dataset),
                                       value=column, clearable=False), class_name="mb-2"),
                    md=6),
            dbc.Col(field("Rows per patient used at most (k)",
                          dbc.Input(id=ids.DATA_PATIENT_K, type="number", min=1, step=1,
                                    value=k), class_name="mb-2"), md=3),
        ]),
        html.Div([html.P(u, className="mb-1") for u in lines], id="data-unit",
                 className="small border-start border-3 ps-2 mb-2"),
        tick,
    ], className=f"border rounded p-2 mb-2 {'border-warning' if asks else 'border-light-subtle'}")


def public_summary(listed: list[Decision], confirmed: bool = False) -> str:
    """One sentence beside the Confirm button: what is (or confirming makes) public."""
    shown = sum(len(d.entries) for d in listed if d.key not in (dec.PATIENT, dec.HIDDEN))
    hidden = sum(len(d.entries) for d in listed if d.key == dec.HIDDEN)
    left = sum(d.asks for d in listed)
    if confirmed:
        return (f"Confirmed: the metadata listed above for {shown} column(s) and the unit of "
                f"privacy are public; {hidden} column(s) stay hidden. Other roles may query "
                "this dataset.")
    text = (f"Confirming makes public the metadata listed above for {shown} column(s) and the "
            f"unit of privacy; {hidden} column(s) stay hidden. Other roles may then query "
            "this dataset.")
    if left:
        text += f" {left} item(s) read from your data still need your tick."
    return text


def checklist(dataset) -> list:
    """The checklist's children for ``dataset`` (None: nothing loaded)."""
    if dataset is None:
        return [patient_card(None, None)]
    review = dataset.load_report.review
    listed = dec.checklist(dataset.schema, review)
    rare = any(review.column(name).rare_levels for d in listed if d.key == dec.LEVELS
               for name in d.columns) if review is not None else False
    cards = [patient_card(dataset, d) if d.key == dec.PATIENT
             else decision_card(d, merge=rare and d.key == dec.LEVELS) for d in listed]
    summary = public_summary(listed, dataset.schema.confirmed)
    return [*cards, html.P(summary, id=ids.DATA_PUBLIC_SUMMARY,
                           className="small fw-semibold mb-2")]
