"""Data page callbacks: upload, select, edit and confirm a schema — owner only, checked per call
(``callbacks.guard``).

One callback serves the page so every outcome lands in the one message area. Every bad input
(an unreadable upload, an invalid bound in the table, a forged dataset id or tick) becomes a
message; the loaded datasets stay as they were. What was read off the data is confirmed by
the owner's tick on its kind of decision (``services.data.decisions``) or by an edit of that
column; the confirm button stores the reviewed schema and publishes it through
``DatasetRegistry.confirm_schema``, and is refused, naming the unticked items, while any
remain.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
from dataclasses import replace

from dash import ALL, Input, Output, State, ctx, html, no_update

from callbacks import guard
from dp_engine.errors import DPError, SchemaError
from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from layouts import ids
from layouts.data import checklist, page
from services.container import Services
from services.data import decisions
from services.data.limits import MAX_CATEGORIES
from services.identity.roles import Role

log = logging.getLogger(__name__)

# message, overview, options, selected, report, checklist, table rows
N_OUTPUTS = 7
UNCHANGED = (no_update,) * (N_OUTPUTS - 1)   # all but the message
OTHER = decisions.OTHER


def page_view(services: Services, identity, _path: str = "/data"):
    """The Data page (the guard lets only the owner in)."""
    return page.layout(services.registry, identity)


PAGE = guard.Page("data", "/data", "Data", Role.OWNER, page_view)


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


def _list(row: dict, key: str, name: str) -> tuple[str, ...]:
    text = str(row.get(key) or "")
    if text.count(";") >= MAX_CATEGORIES:
        raise SchemaError(f"Column '{name}' lists more than {MAX_CATEGORIES:,} entries under "
                          f"'{key.replace('_', ' ')}'; merge rare levels into '{OTHER}'.")
    return tuple(dict.fromkeys(c.strip() for c in text.split(";") if c.strip()))


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
    cats = _list(row, "categories", name) or None
    if kind is ColumnKind.BOOLEAN:
        cats = (False, True)
    elif cats and kind is ColumnKind.ORDINAL:
        cats = tuple(_level(c) for c in cats)
    other = old.other_level if cats and old.other_level in {str(c) for c in cats} else None
    new = ColumnSpec(name, kind, role, str(row.get("label") or name), str(row.get("unit") or ""),
                     lower, upper, width, cats, old.derived_from_data, old.description,
                     _list(row, "missing_codes", name), other)
    if _facts(new) != _facts(old):
        return replace(new, derived_from_data=False)  # an edit is the owner's choice
    return new


def _facts(spec: ColumnSpec) -> tuple:
    """What the owner decides about a column (an edit of any of these is the owner's choice)."""
    return (spec.kind, spec.lower, spec.upper, spec.bin_width, _cats(spec), spec.missing_codes)


def _level(text: str) -> int | float | str:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _cats(spec: ColumnSpec) -> tuple[str, ...] | None:
    return tuple(str(c) for c in spec.categories) if spec.categories else None


def rows_to_schema(schema: Schema, rows: object) -> Schema:
    """The owner's table edits as a schema; a column the owner edited is no longer flagged."""
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
            checklist.checklist(dataset),
            page.schema_rows(dataset.schema, dataset.load_report.review))


def _upload(services, contents, filename):
    content = decode_upload(contents)
    ds = services.registry.add_upload(str(filename or "upload.csv"), content)
    left = decisions.waiting(ds.schema, ds.load_report.review)
    lines = [f"Loaded '{ds.title}' as dataset '{ds.id}'.", *ds.load_report.lines()]
    if left:
        lines.append(f"Check what becomes public under '{page.CHECKLIST_HEADING}': tick the "
                     f"{len(left)} item(s) read from your data (their values are "
                     f"{page.FLAG}), then press Confirm schema.")
    return _page_state(services, ds, page.message([_lines(lines)], "success"))


def _reviewed(ds, rows, unit, ticks) -> tuple[Schema, list[decisions.Decision]]:
    """The stored schema with the owner's edits, patient choice and ticks; the stale ticks.

    ``unit`` is the patient controls' (column, k, k confirmed), or None to keep the schema's.
    """
    review = ds.load_report.review
    listed = decisions.checklist(ds.schema, review)
    schema = rows_to_schema(ds.schema, rows)
    if unit is not None:
        column, k, k_ok = unit
        column = None if column in (None, checklist.ROW_UNIT) else str(column)
        schema = decisions.patient_unit(schema, column, k, k_ok, review)
    return decisions.apply_ticks(listed, schema, _ticks(ticks), review)


def _ticks(ticks: object) -> list[str]:
    """The tick values the browser sent (one list per checklist box; untrusted)."""
    if not isinstance(ticks, list):
        return []
    flat = [t for box in ticks for t in (box if isinstance(box, list) else [box])]
    return [t for t in flat if isinstance(t, str)]


def _stale(stale: list[decisions.Decision]) -> list:
    if not stale:
        return []
    names = "; ".join(f"'{d.title}'" for d in stale)
    return [html.P(f"Not applied: {names} changed since you ticked it. Check the new list "
                   "and tick it again.", className="mb-0 fw-semibold")]


def _lines(lines: list[str]) -> html.Ul:
    return html.Ul([html.Li(x) for x in lines], className="mb-0")


@guard.owner_only(lambda: (guard.refusal(PAGE), *UNCHANGED))
def handle(services, trigger, contents, filename, selected, rows, unit=None, ticks=None):
    """The page's response to one event: a tuple for the N_OUTPUTS outputs.

    ``unit`` is the patient controls' (column, k, k confirmed), or None to keep the schema's;
    ``ticks`` the checklist's tick values.
    """
    try:
        if trigger == ids.DATA_UPLOAD:
            return _upload(services, contents, filename)
        ds = services.registry.get(str(selected))
        if trigger in (ids.DATA_SAVE, ids.DATA_CONFIRM):
            schema, stale = _reviewed(ds, rows, unit, ticks)
            ds = services.registry.update_schema(ds.id, schema)
        if trigger == ids.DATA_SAVE:
            msg = page.message([*_stale(stale),
                                "Saved. The schema is not confirmed yet; other roles cannot "
                                "query this dataset until you confirm it.",
                                _lines(ds.load_report.lines())], "warning" if stale else "info")
            return _page_state(services, ds, msg)
        if trigger == ids.DATA_CONFIRM:
            if ds.schema.awaiting_confirmation():
                left = decisions.waiting(ds.schema, ds.load_report.review)
                msg = page.message([*_stale(stale), *page.waiting_message(left)], "warning")
                return _page_state(services, ds, msg)
            ds = services.registry.confirm_schema(ds.id)
            msg = page.message(f"Schema of '{ds.title}' confirmed: its bounds and categories "
                               "are now public metadata and other roles may query it.",
                               "success")
            return _page_state(services, ds, msg)
        return _page_state(services, ds, "")
    except DPError as exc:
        return (page.message(str(exc), "danger"), *UNCHANGED)
    except Exception:  # never a 500: the owner gets a message, the log gets the trace
        log.exception("Data page request failed")
        return (page.message("Something went wrong while handling this request; nothing was "
                             "changed. The details are in the server log.", "danger"), *UNCHANGED)


def register_callbacks(app, services: Services) -> None:
    @app.callback(
        Output(ids.DATA_MESSAGE, "children"), Output(ids.DATA_OVERVIEW, "children"),
        Output(ids.DATA_LIST, "options"), Output(ids.DATA_LIST, "value"),
        Output(ids.DATA_REPORT, "children"), Output(ids.DATA_CHECKLIST, "children"),
        Output(ids.DATA_TABLE, "data"),
        Input(ids.DATA_UPLOAD, "contents"), Input(ids.DATA_LIST, "value"),
        Input(ids.DATA_SAVE, "n_clicks"), Input(ids.DATA_CONFIRM, "n_clicks"),
        State(ids.DATA_UPLOAD, "filename"), State(ids.DATA_TABLE, "data"),
        State(ids.DATA_PATIENT, "value"), State(ids.DATA_PATIENT_K, "value"),
        State(ids.DATA_PATIENT_K_CONFIRM, "value"),
        State({"type": ids.DATA_DECISION, "key": ALL}, "value"),
        prevent_initial_call=True,
    )
    def _data_page(contents, selected, _save, _confirm, filename, rows, patient, k, k_ok, ticks):
        return handle(services, ctx.triggered_id, contents, filename, selected, rows,
                      (patient, k, k_ok), ticks)
