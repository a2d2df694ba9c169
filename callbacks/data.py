"""Data page callbacks: upload, select, edit and confirm a schema — owner only, checked per call.

One callback serves the page so every outcome lands in the one message area. Every bad input
(an unreadable upload, an invalid bound in the table, a forged dataset id) becomes a message;
the loaded datasets stay as they were.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
from dataclasses import replace

from dash import Input, Output, State, ctx, html, no_update

from dp_engine.errors import DPError, SchemaError
from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from layouts import data as page
from layouts import ids
from services.container import Services
from services.identity import access

log = logging.getLogger(__name__)

N_OUTPUTS = 6  # message, overview, options, selected, report, table rows


def _is_owner(services: Services) -> bool:
    return access.is_owner(services.identity.current())


def decode_upload(contents: object) -> bytes:
    """The file bytes from a dcc.Upload data URL ('data:<type>;base64,<payload>')."""
    if not isinstance(contents, str) or "," not in contents:
        raise DPError("The upload arrived empty or incomplete; choose the file again.")
    header, payload = contents.split(",", 1)
    if ";base64" not in header:
        raise DPError("The upload was not encoded as expected; choose the file again.")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DPError("The upload was damaged in transfer; choose the file again.") from exc


def _bound(row: dict, key: str, name: str) -> float | None:
    text = str(row.get(key) or "").strip().replace(",", ".")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError as exc:
        raise SchemaError(f"The {key.replace('_', ' ')} of '{name}' must be a number, "
                          f"not '{row.get(key)}'.") from exc
    if not math.isfinite(value):
        raise SchemaError(f"The {key.replace('_', ' ')} of '{name}' must be a finite number.")
    return value


def _spec_from_row(row: dict, old: ColumnSpec) -> ColumnSpec:
    name = old.name
    try:
        kind = ColumnKind(str(row.get("kind") or old.kind.value))
        role = ColumnRole(str(row.get("role") or old.role.value))
    except ValueError as exc:
        raise SchemaError(f"Column '{name}': unknown kind or role ({exc}).") from exc
    lower, upper = _bound(row, "lower", name), _bound(row, "upper", name)
    width = _bound(row, "bin_width", name)
    if lower is not None and upper is not None and lower >= upper:
        raise SchemaError(f"Column '{name}': the lower bound must be below the upper bound.")
    if width is not None and width <= 0:
        raise SchemaError(f"Column '{name}': the bin width must be positive.")
    text = str(row.get("categories") or "")
    cats = tuple(c.strip() for c in text.split(";") if c.strip()) or None
    if kind is ColumnKind.BOOLEAN:
        cats = (False, True)
    elif cats and kind is ColumnKind.ORDINAL:
        cats = tuple(_level(c) for c in cats)
    new = ColumnSpec(name, kind, role, str(row.get("label") or name), str(row.get("unit") or ""),
                     lower, upper, width, cats, old.derived_from_data, old.description)
    edited = (new.kind, new.lower, new.upper, new.bin_width, _cats(new)) != (
        old.kind, old.lower, old.upper, old.bin_width, _cats(old))
    return replace(new, derived_from_data=False) if edited else new


def _level(text: str) -> int | float | str:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _cats(spec: ColumnSpec) -> tuple[str, ...] | None:
    return tuple(str(c) for c in spec.categories) if spec.categories else None


def rows_to_schema(schema: Schema, rows: object) -> Schema:
    """The owner's table edits as a schema. A column the owner edited is no longer flagged."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SchemaError("The schema table was not readable; reload the page.")
    by_name = {str(r.get("name")): r for r in rows}
    if sorted(by_name) != sorted(schema.names) or len(rows) != len(schema.columns):
        raise SchemaError("The schema table does not match the dataset's columns; reload the page.")
    return replace(schema, columns=tuple(_spec_from_row(by_name[c.name], c)
                                         for c in schema.columns))


def _page_state(services, dataset, msg):
    datasets = services.registry.list()
    return (msg, page.overview(datasets, services.registry.problems),
            page.dataset_options(datasets), dataset.id, page.report(dataset),
            page.schema_rows(dataset.schema))


def _upload(services, contents, filename):
    content = decode_upload(contents)
    ds = services.registry.add_upload(str(filename or "upload.csv"), content)
    flagged = [c.name for c in ds.schema.flagged_columns()]
    lines = [f"Loaded '{ds.title}' as dataset '{ds.id}'.", *ds.load_report.lines()]
    if flagged:
        lines.append(f"Review the highlighted columns ({', '.join(flagged)}): their bounds or "
                     f"categories are {page.FLAG}. Edit them, then confirm the schema.")
    return _page_state(services, ds, page.message([_lines(lines)], "success"))


def _lines(lines: list[str]) -> html.Ul:
    return html.Ul([html.Li(x) for x in lines], className="mb-0")


def handle(services, trigger, contents, filename, selected, rows):
    """The page's response to one event: a tuple for the N_OUTPUTS outputs."""
    if not _is_owner(services):
        return (page.refusal(), *([no_update] * (N_OUTPUTS - 1)))
    try:
        if trigger == ids.DATA_UPLOAD:
            return _upload(services, contents, filename)
        ds = services.registry.get(str(selected))
        if trigger == ids.DATA_SAVE:
            ds = services.registry.update_schema(ds.id, rows_to_schema(ds.schema, rows))
            msg = page.message(["Saved. The schema is not confirmed yet; other roles cannot "
                                "query this dataset until you confirm it.",
                                _lines(ds.load_report.lines())], "info")
            return _page_state(services, ds, msg)
        if trigger == ids.DATA_CONFIRM:
            edited = rows_to_schema(ds.schema, rows)
            if edited != ds.schema:
                ds = services.registry.update_schema(ds.id, edited)
            ds = services.registry.confirm_schema(ds.id)
            msg = page.message(f"Schema of '{ds.title}' confirmed: its bounds and categories "
                               "are now public metadata and other roles may query it.",
                               "success")
            return _page_state(services, ds, msg)
        return _page_state(services, ds, "")
    except DPError as exc:
        return (page.message(str(exc), "danger"), *([no_update] * (N_OUTPUTS - 1)))
    except Exception:  # never a 500: the owner gets a message, the log gets the trace
        log.exception("Data page request failed")
        return (page.message("Something went wrong while handling this request; nothing was "
                             "changed. The details are in the server log.", "danger"),
                *([no_update] * (N_OUTPUTS - 1)))


def register_callbacks(app, services: Services) -> None:
    @app.callback(
        Output(ids.DATA_MESSAGE, "children"), Output(ids.DATA_OVERVIEW, "children"),
        Output(ids.DATA_LIST, "options"), Output(ids.DATA_LIST, "value"),
        Output(ids.DATA_REPORT, "children"), Output(ids.DATA_TABLE, "data"),
        Input(ids.DATA_UPLOAD, "contents"), Input(ids.DATA_LIST, "value"),
        Input(ids.DATA_SAVE, "n_clicks"), Input(ids.DATA_CONFIRM, "n_clicks"),
        State(ids.DATA_UPLOAD, "filename"), State(ids.DATA_TABLE, "data"),
        prevent_initial_call=True,
    )
    def _data_page(contents, selected, _save, _confirm, filename, rows):
        return handle(services, ctx.triggered_id, contents, filename, selected, rows)
