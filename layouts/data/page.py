"""Data page (owner only): upload a CSV, review and confirm each dataset's public schema.

Columns whose metadata was read off the data are confirmed one by one ("Your decision"), with
the number of values each bound clamps beside it; the confirm button publishes the schema and
confirms in bulk only recognised clinical defaults and other public facts.
"""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import dash_table, dcc, html

from dp_engine.schema import ColumnKind, ColumnRole, Schema
from layouts import ids
from layouts.components.accessible import field, label_id
from services.data.review import DataReview

FLAG = "derived from the data — not private"
HIDDEN = "never shown to non-owners"
CATEGORY_SEP = "; "
ROW_UNIT = "__row__"  # the patient dropdown's "each row is one patient"

# "Your decision" for a column whose metadata was read off the data
DECIDE_WAIT, DECIDE_CONFIRM, DECIDE_MERGE = "awaiting", "confirm", "merge"
DECISIONS = [
    {"label": "awaiting your confirmation", "value": DECIDE_WAIT},
    {"label": "confirm this column", "value": DECIDE_CONFIRM},
    {"label": "merge rare levels into 'other', then confirm", "value": DECIDE_MERGE},
]

SCHEMA_COLUMNS = [  # the decision first, beside what it decides: bounds, clamp counts, facts
    ("name", "Column", False), ("decision", "Your decision", True), ("flag", "Status", False),
    ("lower", "Lower bound", True), ("clamp_low", "Clamped up to it", False),
    ("upper", "Upper bound", True), ("clamp_high", "Clamped down to it", False),
    ("review", "What the data shows (owner only)", False),
    ("categories", "Categories (; separated)", True),
    ("missing_codes", "Missing-value codes (; separated)", True),
    ("kind", "Kind", True), ("role", "Role", True), ("label", "Label", True),
    ("unit", "Unit", True), ("bin_width", "Bin width", True),
]


def _number(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _clamp(count: int, bound: float | None) -> str:
    return "" if bound is None else str(count)


def schema_rows(schema: Schema, review: DataReview | None = None) -> list[dict[str, str]]:
    """One editable table row per column; flagged columns carry the FLAG status.

    With the owner's ``review``: the values each bound clamps and what the data shows.
    """
    rows = []
    for c in schema.columns:
        status = FLAG if c.derived_from_data else (HIDDEN if not c.queryable else "")
        cats = CATEGORY_SEP.join(str(v) for v in c.categories) if c.categories else ""
        r = review.column(c.name) if review is not None else None
        rows.append({
            "name": c.name, "kind": c.kind.value, "role": c.role.value, "label": c.label,
            "unit": c.unit, "lower": _number(c.lower), "upper": _number(c.upper),
            "clamp_low": _clamp(r.clamped_below, c.lower) if r else "",
            "clamp_high": _clamp(r.clamped_above, c.upper) if r else "",
            "bin_width": _number(c.bin_width),
            "categories": "" if c.kind is ColumnKind.BOOLEAN else cats,
            "missing_codes": CATEGORY_SEP.join(c.missing_codes),
            "review": " ".join(review.notes(c.name)) if review is not None else "",
            "flag": status, "decision": DECIDE_WAIT if c.derived_from_data else "",
        })
    return rows


def schema_table(rows: list[dict[str, str]]) -> dash_table.DataTable:
    dropdown = {
        "kind": {"options": [{"label": k.value, "value": k.value} for k in ColumnKind]},
        "role": {"options": [{"label": r.value, "value": r.value} for r in ColumnRole]},
        "decision": {"options": DECISIONS, "clearable": False},
    }
    return dash_table.DataTable(
        id=ids.DATA_TABLE,
        data=rows,
        columns=[
            {"id": key, "name": name, "editable": editable,
             **({"presentation": "dropdown"} if key in dropdown else {})}
            for key, name, editable in SCHEMA_COLUMNS
        ],
        dropdown=dropdown,
        editable=True,
        style_table={"overflowX": "auto"},
        style_cell={"fontSize": "0.85rem", "textAlign": "left", "whiteSpace": "normal",
                    "height": "auto", "minWidth": "5rem", "verticalAlign": "top"},
        style_cell_conditional=[
            {"if": {"column_id": "review"}, "minWidth": "24rem"},
            {"if": {"column_id": "decision"}, "minWidth": "16rem"},
            {"if": {"column_id": "categories"}, "minWidth": "10rem"},
        ],
        style_header={"fontWeight": "bold"},
        style_data_conditional=[
            {"if": {"filter_query": '{flag} contains "derived"'},
             "backgroundColor": "#fff3cd", "fontWeight": "bold"},
            {"if": {"filter_query": '{flag} contains "never"'}, "color": "#595959"},
            {"if": {"filter_query": '{review} != ""', "column_id": "review"},
             "backgroundColor": "#fde2e1"},
        ],
        css=[{"selector": ".Select-menu-outer", "rule": "display: block !important"}],
    )


def overview(datasets: list, problems: list[str]) -> html.Div:
    """Every loaded dataset with its version and whether its schema is confirmed."""
    header = ["Dataset", "Id", "Source", "Rows", "Columns", "Version", "Schema"]
    body = [
        html.Tr([html.Td(d.title), html.Td(html.Code(d.id)), html.Td(d.source),
                 html.Td(d.row_count), html.Td(len(d.schema.columns)),
                 html.Td(html.Code(d.version)),
                 html.Td(dbc.Badge("confirmed", color="success") if d.schema.confirmed
                         else dbc.Badge("awaiting confirmation", color="warning"))])
        for d in datasets
    ]
    alerts = [dbc.Alert(p, color="danger", className="small py-2") for p in problems]
    return html.Div([
        dbc.Table([html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(body)],
                  size="sm", hover=True, responsive=True, className="small"),
        *alerts,
    ])


def report(dataset) -> html.Div:
    """The owner-only load report: rows, repairs, warnings and the unit of privacy."""
    lines = dataset.load_report.lines()
    notes = list(dataset.schema.notes)
    schema = dataset.schema
    if schema.confirmed:
        status = "Confirmed: non-owners may query this dataset."
    else:
        waiting = schema.awaiting_confirmation()
        status = ("Not confirmed: only you can query this dataset until you confirm its schema."
                  + (f" Still to confirm one by one: {', '.join(waiting)}." if waiting else ""))
    review = dataset.load_report.review
    unit = review.unit_lines(schema) if review is not None else []
    return html.Div([
        html.P(status, className="fw-bold mb-1"),
        html.Div([html.P(u, className="mb-1") for u in unit], id="data-unit",
                 className="small border-start border-3 ps-2 mb-2"),
        html.Ul([html.Li(x) for x in lines + notes], className="small mb-0"),
    ])


def patient_options(dataset) -> list[dict[str, str]]:
    """"Each row is one patient", then the columns that may identify a patient."""
    review = dataset.load_report.review
    names = list(review.candidates) if review is not None else []
    if dataset.schema.patient_column and dataset.schema.patient_column not in names:
        names.insert(0, dataset.schema.patient_column)
    return [{"label": "Each row is one patient", "value": ROW_UNIT},
            *({"label": f"Patients are identified by '{n}'", "value": n} for n in names)]


def patient_values(dataset) -> tuple[str, int, bool]:
    """Dropdown value, k and the "confirm k" tick for the dataset's schema."""
    schema = dataset.schema
    return (schema.patient_column or ROW_UNIT, schema.max_rows_per_patient,
            not schema.patient_bound_derived)


def patient_controls(dataset) -> dbc.Row:
    """The owner's choice of the unit of privacy: the patient column and k."""
    column, k, confirmed = patient_values(dataset) if dataset else (ROW_UNIT, 1, True)
    return dbc.Row([
        dbc.Col(field("Who is a patient?",
                      dcc.Dropdown(id=ids.DATA_PATIENT,
                                   options=patient_options(dataset) if dataset else [],
                                   value=column, clearable=False), class_name=""), md=5),
        dbc.Col(field("Rows per patient used at most (k)",
                      dbc.Input(id=ids.DATA_PATIENT_K, type="number", min=1, step=1, value=k),
                      class_name=""), md=3),
        dbc.Col(dbc.Checkbox(id=ids.DATA_PATIENT_K_CONFIRM, value=confirmed,
                             label="I confirm this k (it may have been read off the data)"),
                md=4, className="align-self-end"),
    ], className="mb-3")


def dataset_options(datasets: list) -> list[dict[str, str]]:
    return [{"label": f"{d.title}{'' if d.schema.confirmed else '  (unconfirmed)'}",
             "value": d.id} for d in datasets]


def message(text: str | list, color: str = "info") -> dbc.Alert:
    return dbc.Alert(text, color=color, className="small", dismissable=True)


def layout(registry, identity) -> html.Div | dbc.Alert:
    datasets = registry.list()
    first = datasets[0] if datasets else None
    upload = dcc.Upload(
        id=ids.DATA_UPLOAD,
        children=html.Div(["Drop a CSV file here or ", html.A("choose one")]),
        multiple=False,
        accept=".csv,.tsv,.txt,text/csv,text/plain",
        className="border border-2 rounded p-4 text-center text-muted",
        style={"borderStyle": "dashed"},
    )
    limit = registry.max_upload_bytes / 1_000_000
    return html.Div([
        html.H1("Datasets and their public schemas", className="h4"),
        html.P(
            "Bounds, categories and bins are public metadata: every private statistic relies "
            "on them. Values read off the data are highlighted until you confirm or edit them. "
            "Other roles only see datasets whose schema you confirmed.",
            className="text-muted small",
        ),
        dbc.Row([
            dbc.Col([html.Label("Load a CSV export", id=label_id(ids.DATA_UPLOAD),
                                htmlFor=ids.DATA_UPLOAD, className="form-label fw-semibold small"),
                     upload, html.Div(f"CSV (comma, semicolon or tab separated), at most "
                                      f"{limit:g} MB. Stored on this server only.",
                                      className="form-text")], md=5),
            dbc.Col(html.Div(id=ids.DATA_MESSAGE, role="status", **{"aria-live": "polite"}),
                    md=7),
        ], className="mb-3"),
        html.Div(overview(datasets, registry.problems), id=ids.DATA_OVERVIEW),
        dbc.Row([
            dbc.Col(field("Dataset to review",
                          dcc.Dropdown(id=ids.DATA_LIST, options=dataset_options(datasets),
                                       value=first.id if first else None, clearable=False),
                          class_name=""),
                    md=5),
            dbc.Col([
                dbc.Button("Save edits", id=ids.DATA_SAVE, color="secondary",
                           className="me-2"),
                dbc.Button("Confirm schema", id=ids.DATA_CONFIRM, color="primary"),
            ], md=7, className="text-md-end mt-2 mt-md-0 align-self-end"),
        ], className="my-3"),
        html.P(
            "Highlighted columns were read off the data: confirm each in 'Your decision' (the "
            "clamp counts show what its bounds do to the values), or edit it. 'Confirm schema' "
            "then publishes the schema; it confirms in bulk only recognised clinical defaults "
            "and other public facts.", className="text-muted small",
        ),
        html.Div(report(first) if first else "", id=ids.DATA_REPORT, className="mb-2"),
        patient_controls(first),
        schema_table(schema_rows(first.schema, first.load_report.review) if first else []),
    ])

