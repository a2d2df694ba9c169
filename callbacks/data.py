"""Data page callbacks: upload, select, edit and confirm a schema — owner only, checked per call
(``callbacks.guard``).

One callback serves the page so every outcome lands in the one message area. Every bad input
(an unreadable upload, an invalid bound in the table, a forged dataset id) becomes a message;
the loaded datasets stay as they were. A column read off the data is confirmed only by the
owner's decision on its own row; the confirm button publishes, and is refused while any such
column (or a proposed rows-per-patient bound) is unconfirmed.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
from dataclasses import replace

from dash import Input, Output, State, ctx, html, no_update

from callbacks import guard
from dp_engine.errors import DPError, SchemaError
from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from layouts import ids
from layouts.data import page
from services.container import Services
from services.data.limits import MAX_CATEGORIES
from services.data.review import DataReview
from services.identity.roles import Role

log = logging.getLogger(__name__)

# message, overview, options, selected, report, patient options, patient, k, k ok, table rows
N_OUTPUTS = 10
OTHER = "other"


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


def _spec_from_row(row: dict, old: ColumnSpec, review: DataReview | None) -> ColumnSpec:
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
    edited = _facts(new) != _facts(old)
    decision = str(row.get("decision") or "")
    if decision == page.DECIDE_MERGE and new.kind is ColumnKind.CATEGORICAL and review:
        new = _merge_rare(new, review)
    if edited or decision in (page.DECIDE_CONFIRM, page.DECIDE_MERGE):
        return replace(new, derived_from_data=False)
    return new


def _facts(spec: ColumnSpec) -> tuple:
    """What the owner decides about a column (an edit of any of these is the owner's choice)."""
    return (spec.kind, spec.lower, spec.upper, spec.bin_width, _cats(spec), spec.missing_codes)


def _merge_rare(spec: ColumnSpec, review: DataReview) -> ColumnSpec:
    """The column with its rare levels replaced by one catch-all level 'other'."""
    rare = {lvl for lvl, _ in review.column(spec.name).rare_levels}
    kept = tuple(c for c in spec.categories or () if str(c) not in rare)
    if not rare or len(kept) == len(spec.categories or ()):
        return spec
    if OTHER not in {str(c) for c in kept}:
        kept = (*kept, OTHER)
    return replace(spec, categories=kept, other_level=OTHER)


def _level(text: str) -> int | float | str:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _cats(spec: ColumnSpec) -> tuple[str, ...] | None:
    return tuple(str(c) for c in spec.categories) if spec.categories else None


def rows_to_schema(schema: Schema, rows: object, review: DataReview | None = None) -> Schema:
    """The owner's table edits as a schema.

    A column the owner edited, or confirmed in its own row's decision, is no longer flagged.
    """
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SchemaError("The schema table was not readable; reload the page.")
    by_name = {str(r.get("name")): r for r in rows}
    if sorted(by_name) != sorted(schema.names) or len(rows) != len(schema.columns):
        raise SchemaError("The schema table does not match the dataset's columns; reload the page.")
    return replace(schema, columns=tuple(_spec_from_row(by_name[c.name], c, review)
                                         for c in schema.columns))


def _whole(value: object) -> int:
    try:
        k = float(str(value).strip())
    except ValueError as exc:
        raise SchemaError(f"Rows per patient must be a whole number, not '{value}'.") from exc
    if not (math.isfinite(k) and k.is_integer() and k >= 1):
        raise SchemaError(f"Rows per patient must be a whole number of at least 1, not '{value}'.")
    return int(k)


def patient_unit(schema: Schema, column: object, k: object, k_confirmed: object,
                 review: DataReview | None) -> Schema:
    """The owner's unit of privacy: the patient column (or one row = one patient) and k.

    A k the owner typed is theirs; a k left as proposed stays flagged as read off the data
    until the owner ticks "I confirm this k". Choosing another column proposes its own k.
    """
    if column is None or column == page.ROW_UNIT:
        return replace(schema, patient_column=None, max_rows_per_patient=1,
                       patient_bound_derived=False)
    column = str(column)
    if column not in schema:
        raise SchemaError(f"The dataset has no column named '{column}'.")
    typed = None if k is None or str(k).strip() == "" else _whole(k)
    if column != schema.patient_column:
        proposed = review.proposed_bound(column) if review is not None else 1
        derived = typed is None or typed == schema.max_rows_per_patient
        k_new = proposed if derived else typed
    else:
        derived = schema.patient_bound_derived and typed in (None, schema.max_rows_per_patient)
        k_new = schema.max_rows_per_patient if typed is None else typed
    derived = derived and k_confirmed is not True
    return replace(schema, patient_column=column, max_rows_per_patient=k_new,
                   patient_bound_derived=derived)


def _page_state(services, dataset, msg):
    datasets = services.registry.list()
    return (msg, page.overview(datasets, services.registry.problems),
            page.dataset_options(datasets), dataset.id, page.report(dataset),
            page.patient_options(dataset), *page.patient_values(dataset),
            page.schema_rows(dataset.schema, dataset.load_report.review))


def _upload(services, contents, filename):
    content = decode_upload(contents)
    ds = services.registry.add_upload(str(filename or "upload.csv"), content)
    waiting = ds.schema.awaiting_confirmation()
    lines = [f"Loaded '{ds.title}' as dataset '{ds.id}'.", *ds.load_report.lines()]
    if waiting:
        lines.append(f"Review the highlighted columns ({', '.join(waiting)}): their bounds or "
                     f"categories are {page.FLAG}. Edit them or confirm each in 'Your "
                     "decision', then confirm the schema.")
    return _page_state(services, ds, page.message([_lines(lines)], "success"))


def _edited(ds, rows, unit):
    review = ds.load_report.review
    schema = rows_to_schema(ds.schema, rows, review)
    return patient_unit(schema, *unit, review) if unit is not None else schema


def _lines(lines: list[str]) -> html.Ul:
    return html.Ul([html.Li(x) for x in lines], className="mb-0")


@guard.owner_only(lambda: (guard.refusal(PAGE), *([no_update] * (N_OUTPUTS - 1))))
def handle(services, trigger, contents, filename, selected, rows, unit=None):
    """The page's response to one event: a tuple for the N_OUTPUTS outputs.

    ``unit`` is the patient controls' (column, k, k confirmed), or None to keep the schema's.
    """
    try:
        if trigger == ids.DATA_UPLOAD:
            return _upload(services, contents, filename)
        ds = services.registry.get(str(selected))
        if trigger == ids.DATA_SAVE:
            ds = services.registry.update_schema(ds.id, _edited(ds, rows, unit))
            msg = page.message(["Saved. The schema is not confirmed yet; other roles cannot "
                                "query this dataset until you confirm it.",
                                _lines(ds.load_report.lines())], "info")
            return _page_state(services, ds, msg)
        if trigger == ids.DATA_CONFIRM:
            edited = _edited(ds, rows, unit)
            if edited != ds.schema:
                ds = services.registry.update_schema(ds.id, edited)
            waiting = ds.schema.awaiting_confirmation()
            if waiting:
                msg = page.message(
                    "Not confirmed: these were read off the data and need your decision one "
                    f"by one first: {', '.join(waiting)}. Your other edits were saved.",
                    "warning")
                return _page_state(services, ds, msg)
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
        Output(ids.DATA_REPORT, "children"),
        Output(ids.DATA_PATIENT, "options"), Output(ids.DATA_PATIENT, "value"),
        Output(ids.DATA_PATIENT_K, "value"), Output(ids.DATA_PATIENT_K_CONFIRM, "value"),
        Output(ids.DATA_TABLE, "data"),
        Input(ids.DATA_UPLOAD, "contents"), Input(ids.DATA_LIST, "value"),
        Input(ids.DATA_SAVE, "n_clicks"), Input(ids.DATA_CONFIRM, "n_clicks"),
        State(ids.DATA_UPLOAD, "filename"), State(ids.DATA_TABLE, "data"),
        State(ids.DATA_PATIENT, "value"), State(ids.DATA_PATIENT_K, "value"),
        State(ids.DATA_PATIENT_K_CONFIRM, "value"),
        prevent_initial_call=True,
    )
    def _data_page(contents, selected, _save, _confirm, filename, rows, patient, k, k_ok):
        return handle(services, ctx.triggered_id, contents, filename, selected, rows,
                      (patient, k, k_ok))
