"""Data page (owner only): upload a CSV, see what becomes public, confirm the schema.

The page reads top to bottom: load a file; the checklist lists, per kind of decision, what
becomes public (one tick for each kind read off the data, the patient decision among them);
Confirm schema publishes it. The table below edits single columns.
"""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import dcc, html

from layouts import ids
from layouts.components.accessible import field, label_id
from layouts.data.checklist import ROW_UNIT, checklist
from layouts.data.table import FLAG, HIDDEN, schema_rows, schema_table
from services.data import decisions as dec

__all__ = ["FLAG", "HIDDEN", "ROW_UNIT", "layout", "message", "overview", "report",
           "schema_rows", "waiting_message"]

CHECKLIST_HEADING = "What becomes public"


def overview(datasets: list, problems: list[str]) -> html.Div:
    """Every loaded dataset with its version and whether its schema is confirmed."""
    header = ["Dataset", "Id", "Source", "Rows", "Columns", "Version", "Schema"]
    body = [html.Tr([html.Td(d.title), html.Td(html.Code(d.id)), html.Td(d.source),
                     html.Td(d.row_count), html.Td(len(d.schema.columns)),
                     html.Td(html.Code(d.version)),
                     html.Td(dbc.Badge("confirmed", color="success") if d.schema.confirmed
                             else dbc.Badge("awaiting confirmation", color="warning",
                                            text_color="dark"))])
            for d in datasets]
    alerts = [dbc.Alert(p, color="danger", className="small py-2") for p in problems]
    return html.Div([
        dbc.Table([html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(body)],
                  size="sm", hover=True, responsive=True, className="small"),
        *alerts,
    ])


def report(dataset) -> html.Div:
    """The owner-only load report: whether the schema is public, rows and repairs."""
    schema = dataset.schema
    if schema.confirmed:
        status = "Confirmed: non-owners may query this dataset."
    else:
        left = len(dec.waiting(schema, dataset.load_report.review))
        status = ("Not confirmed: only you can query this dataset until you confirm its "
                  "schema." + (f" {left} item(s) under '{CHECKLIST_HEADING}' need your tick."
                               if left else ""))
    lines = dataset.load_report.lines() + list(schema.notes)
    return html.Div([
        html.P(status, className="fw-bold mb-1"),
        html.Ul([html.Li(x) for x in lines], className="small mb-0"),
    ])


def waiting_message(left: list[dec.Decision]) -> list:
    """The refusal: each unticked item named as it reads in the checklist."""
    items = []
    for d in left:
        if d.key == dec.PATIENT:
            items.append(html.Li(f"'{d.title}': tick 'I confirm k' in its box, or type the k "
                                 "your protocol fixes."))
        else:
            items.append(html.Li(f"'{d.title}': tick it, or edit those columns below."))
    return [html.P(f"Not confirmed yet. Under '{CHECKLIST_HEADING}', these need your tick "
                   "first (your other edits were saved):", className="mb-1"),
            html.Ul(items, className="mb-0")]


def dataset_options(datasets: list) -> list[dict[str, str]]:
    return [{"label": f"{d.title}{'' if d.schema.confirmed else '  (unconfirmed)'}",
             "value": d.id} for d in datasets]


def message(text: str | list, color: str = "info") -> dbc.Alert:
    return dbc.Alert(text, color=color, className="small", dismissable=True)


def layout(registry, identity) -> html.Div | dbc.Alert:
    datasets = registry.list()
    first = datasets[0] if datasets else None
    upload = dcc.Upload(id=ids.DATA_UPLOAD, multiple=False,
                        children=html.Div(["Drop a CSV file here or ", html.A("choose one")]),
                        accept=".csv,.tsv,.txt,text/csv,text/plain",
                        className="border border-2 rounded p-4 text-center text-muted",
                        style={"borderStyle": "dashed"})
    limit = registry.max_upload_bytes / 1_000_000
    return html.Div([
        html.H1("Datasets and their public schemas", className="h4"),
        html.P("Bounds, categories and bins are public metadata: every private statistic relies "
               "on them. What was read off the data stays private until you confirm it. Other "
               "roles only see datasets whose schema you confirmed.", className="text-muted small"),
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
        dbc.Row(dbc.Col(field("Dataset to review",
                              dcc.Dropdown(id=ids.DATA_LIST, options=dataset_options(datasets),
                                           value=first.id if first else None, clearable=False),
                              class_name=""), md=5), className="my-3"),
        html.Div(report(first) if first else "", id=ids.DATA_REPORT, className="mb-3"),
        html.H2(CHECKLIST_HEADING, className="h5"),
        html.P("Each box lists what confirming makes public. Tick the boxes marked as read "
               "from your data (one tick confirms every column in the box), then confirm. "
               "To change one column instead, edit it in the table below.",
               className="text-muted small"),
        html.Div(checklist(first), id=ids.DATA_CHECKLIST),
        dbc.Button("Confirm schema", id=ids.DATA_CONFIRM, color="primary", className="mb-4"),
        html.H2("Edit a column", className="h5"),
        html.P("An edit is your choice for that column: it is no longer marked as read from "
               "the data. 'Save edits' updates the list above without confirming.",
               className="text-muted small"),
        schema_table(schema_rows(first.schema, first.load_report.review) if first else []),
        dbc.Button("Save edits", id=ids.DATA_SAVE, color="secondary", className="mt-2"),
    ])
