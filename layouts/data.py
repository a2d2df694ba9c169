"""Data page (owner only): upload a CSV, review and confirm each dataset's public schema."""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import dash_table, dcc, html

from dp_engine.schema import ColumnKind, ColumnRole, Schema
from layouts import ids
from services.identity.roles import Role

FLAG = "derived from the data — not private"
HIDDEN = "never shown to non-owners"
CATEGORY_SEP = "; "

SCHEMA_COLUMNS = [
    ("name", "Column", False), ("kind", "Kind", True), ("role", "Role", True),
    ("label", "Label", True), ("unit", "Unit", True), ("lower", "Lower bound", True),
    ("upper", "Upper bound", True), ("bin_width", "Bin width", True),
    ("categories", "Categories (; separated)", True), ("flag", "Status", False),
]


def refusal() -> dbc.Alert:
    return dbc.Alert("The Data page is for the data owner (the hospital) only.", color="warning")


def _number(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def schema_rows(schema: Schema) -> list[dict[str, str]]:
    """One editable table row per column; flagged columns carry the FLAG status."""
    rows = []
    for c in schema.columns:
        status = FLAG if c.derived_from_data else (HIDDEN if not c.queryable else "")
        cats = CATEGORY_SEP.join(str(v) for v in c.categories) if c.categories else ""
        rows.append({
            "name": c.name, "kind": c.kind.value, "role": c.role.value, "label": c.label,
            "unit": c.unit, "lower": _number(c.lower), "upper": _number(c.upper),
            "bin_width": _number(c.bin_width),
            "categories": "" if c.kind is ColumnKind.BOOLEAN else cats, "flag": status,
        })
    return rows


def schema_table(rows: list[dict[str, str]]) -> dash_table.DataTable:
    dropdown = {
        "kind": {"options": [{"label": k.value, "value": k.value} for k in ColumnKind]},
        "role": {"options": [{"label": r.value, "value": r.value} for r in ColumnRole]},
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
                    "height": "auto", "minWidth": "5rem"},
        style_header={"fontWeight": "bold"},
        style_data_conditional=[
            {"if": {"filter_query": '{flag} contains "derived"'},
             "backgroundColor": "#fff3cd", "fontWeight": "bold"},
            {"if": {"filter_query": '{flag} contains "never"'}, "color": "#6c757d"},
        ],
        css=[{"selector": ".Select-menu-outer", "rule": "display: block !important"}],
    )


def overview(datasets: list, problems: list[str]) -> html.Div:
    """Every loaded dataset with its version and whether its schema is confirmed."""
    header = ["Dataset", "Id", "Source", "Rows", "Columns", "Version", "Schema"]
    body = [
        html.Tr([html.Td(d.title), html.Td(html.Code(d.id)), html.Td(d.source),
                 html.Td(len(d.frame)), html.Td(len(d.schema.columns)),
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
    """The owner-only load report: rows, repairs and warnings."""
    lines = dataset.load_report.lines()
    notes = list(dataset.schema.notes)
    status = ("Confirmed: non-owners may query this dataset." if dataset.schema.confirmed else
              "Not confirmed: only you can query this dataset until you confirm its schema.")
    return html.Div([
        html.P(status, className="fw-bold mb-1"),
        html.Ul([html.Li(x) for x in lines + notes], className="small mb-0"),
    ])


def dataset_options(datasets: list) -> list[dict[str, str]]:
    return [{"label": f"{d.title}{'' if d.schema.confirmed else '  (unconfirmed)'}",
             "value": d.id} for d in datasets]


def message(text: str | list, color: str = "info") -> dbc.Alert:
    return dbc.Alert(text, color=color, className="small", dismissable=True)


def layout(registry, identity) -> html.Div | dbc.Alert:
    if not getattr(identity, "authenticated", False) or identity.role is not Role.OWNER:
        return refusal()
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
        html.H2("Datasets and their public schemas", className="h4"),
        html.P(
            "Bounds, categories and bins are public metadata: every private statistic relies "
            "on them. Values read off the data are highlighted until you confirm or edit them. "
            "Other roles only see datasets whose schema you confirmed.",
            className="text-muted small",
        ),
        dbc.Row([
            dbc.Col([upload, html.Div(f"CSV (comma, semicolon or tab separated), at most "
                                      f"{limit:g} MB. Stored on this server only.",
                                      className="form-text")], md=5),
            dbc.Col(html.Div(id=ids.DATA_MESSAGE, role="status", **{"aria-live": "polite"}),
                    md=7),
        ], className="mb-3"),
        html.Div(overview(datasets, registry.problems), id=ids.DATA_OVERVIEW),
        dbc.Row([
            dbc.Col(dcc.Dropdown(id=ids.DATA_LIST, options=dataset_options(datasets),
                                 value=first.id if first else None, clearable=False),
                    md=5),
            dbc.Col([
                dbc.Button("Save edits", id=ids.DATA_SAVE, color="secondary",
                           className="me-2"),
                dbc.Button("Confirm schema", id=ids.DATA_CONFIRM, color="primary"),
            ], md=7, className="text-md-end mt-2 mt-md-0"),
        ], className="my-3"),
        html.Div(report(first) if first else "", id=ids.DATA_REPORT, className="mb-2"),
        schema_table(schema_rows(first.schema) if first else []),
    ])

