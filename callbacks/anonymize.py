"""Anonymize page callbacks — owner only, re-checked on every call (``callbacks.guard``).

Each callback is a thin ``handle_*`` function (testable without a browser) wrapped by
``register_callbacks``: authorize, validate, run ``services.anonymizer`` on the runner, build the
report and figure. A forged request from another role gets a refusal message and no data.
"""

from __future__ import annotations

import logging
from typing import Any

from dash import Input, Output, State, ctx, dcc, no_update

from callbacks import guard
from dp_engine.errors import DPError
from dp_engine.rng import RngLike
from dp_engine.schema import ColumnRole
from layouts import ids
from layouts.anonymize import page
from layouts.anonymize.figures import before_after_scatter, empty_figure
from layouts.components.accessible import chart_table_children
from services.anonymizer import anonymize_job
from services.container import Services
from services.identity.roles import Role
from services.runner import JobDied

log = logging.getLogger(__name__)

MAX_K = 100
DIED = ("Failed: the server process anonymizing ended before it finished. Nothing was "
        "released or charged; run it again.")


def page_view(services: Services, identity, _path: str = "/anonymize"):
    """The Anonymize page (the guard lets only the owner in)."""
    return page.layout(services.registry, identity)


PAGE = guard.Page("anonymize", "/anonymize", "Anonymize", Role.OWNER, page_view)


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DPError("The column choice was not readable; reload the page.")
    return list(dict.fromkeys(value))


def _k(value: Any) -> int:
    try:
        k = float(value)
    except (TypeError, ValueError):
        raise DPError("k must be a whole number between 2 and 100.") from None
    if not k.is_integer() or not 2 <= k <= MAX_K:
        raise DPError("k must be a whole number between 2 and 100.")
    return int(k)


@guard.owner_only(([], [], [], []))
def handle_dataset(services, dataset_id: Any) -> tuple:
    """Column options and defaults for the chosen dataset."""
    try:
        schema = services.registry.get(str(dataset_id)).schema
    except DPError:
        return ([], [], [], [])
    opts = page.column_options(schema)
    return (opts, page.default_columns(schema, ColumnRole.QUASI_IDENTIFIER),
            opts, page.default_columns(schema, ColumnRole.SENSITIVE))


@guard.owner_only(([], None, [], None))
def handle_axes(services, dataset_id: Any, qis: Any, x: Any, y: Any) -> tuple:
    """Scatter axis choices follow the chosen quasi-identifiers (current choice kept)."""
    try:
        schema = services.registry.get(str(dataset_id)).schema
        opts = page.axis_options(schema, _names(qis))
    except DPError:
        return ([], None, [], None)
    values = [o["value"] for o in opts]
    x = x if x in values else (values[0] if values else None)
    y = y if y in values else (next((v for v in values if v != x), x))
    return (opts, x, opts, y)


def figure_from_store(store: Any, x: Any, y: Any) -> dict:
    if not isinstance(store, dict) or "plot" not in store:
        return empty_figure()
    plot = store["plot"]
    if x not in plot["before"] or y not in plot["before"]:
        return empty_figure("Choose two of the quasi-identifiers used in this run.")
    labels = store.get("labels", {})
    return before_after_scatter(labels.get(x, x), labels.get(y, y), plot["before"][x],
                                plot["before"][y], plot["after"][x], plot["after"][y],
                                plot["groups"], method=store.get("method", ""),
                                k=store.get("k", 0))


def _run(services, dataset_id, qis, sensitive, k, method, mode, x, y, rng):
    if method not in page.METHODS or mode not in page.SENSITIVE_MODES:
        raise DPError("Unknown method or sensitive-column mode; reload the page.")
    ds = services.registry.get(str(dataset_id))
    qis, sensitive, k = _names(qis), _names(sensitive), _k(k)
    allowed = {o["value"] for o in page.column_options(ds.schema)}
    bad = [c for c in qis + sensitive if c not in allowed]
    if bad:
        raise DPError(f"{', '.join(bad)} cannot be anonymized here (identifier, free text or "
                      "unknown column).")
    got = services.runner.call(anonymize_job, ds.id, qis, sensitive, k, method, mode, rng)
    store = got.store
    done = page.message(f"Anonymized {got.n_records} records of '{got.title}' with {method}, "
                        f"k = {k} ({page.LABEL}).",
                        "success" if got.result.report.k_anonymous else "warning")
    return (done, page.report_view(got.result, store["labels"]), figure_from_store(store, x, y),
            store, False)


@guard.owner_only(lambda: (guard.refusal(PAGE), None, empty_figure(), None, True))
def handle_run(services, trigger, dataset_id, qis, sensitive, k, method, mode, x, y, store,
               rng: RngLike = None) -> tuple:
    """(message, report, figure, store, download disabled) for one event."""
    unchanged = (no_update,) * 4
    try:
        if trigger in (ids.AN_SCATTER_X, ids.AN_SCATTER_Y):
            return (no_update, no_update, figure_from_store(store, x, y), no_update, no_update)
        return _run(services, dataset_id, qis, sensitive, k, method, mode, x, y, rng)
    except DPError as exc:
        return (page.message(str(exc), "danger"), *unchanged)
    except JobDied:   # its process was killed: nothing was released, nothing kept
        log.warning("Anonymize: the runner's process died", exc_info=True)
        return (page.message(DIED, "danger"), *unchanged)
    except Exception:  # never a 500: the owner gets a message, the log gets the trace
        log.exception("Anonymize request failed")
        return (page.message("Something went wrong while anonymizing; nothing was released. "
                             "The details are in the server log.", "danger"), *unchanged)


@guard.owner_only(no_update)
def handle_download(services, store: Any):
    """The anonymized CSV (rows shuffled, no group ids) as a dcc.Download payload."""
    if not isinstance(store, dict) or not isinstance(store.get("csv"), str):
        return no_update
    name = str(store.get("filename") or "anonymized.csv")
    return dcc.send_string(store["csv"], name)


def _choice_outputs(*component_ids: str) -> list[Output]:
    """Options and value of each dropdown, in that order."""
    return [Output(c, p) for c in component_ids for p in ("options", "value")]


def register_callbacks(app, services: Services) -> None:
    @app.callback(*_choice_outputs(ids.AN_QIS, ids.AN_SENSITIVE), Input(ids.AN_DATASET, "value"),
                  prevent_initial_call=True)
    def _dataset(dataset_id):
        return handle_dataset(services, dataset_id)

    @app.callback(*_choice_outputs(ids.AN_SCATTER_X, ids.AN_SCATTER_Y), Input(ids.AN_QIS, "value"),
                  *[State(i, "value") for i in (ids.AN_DATASET, ids.AN_SCATTER_X,
                                                ids.AN_SCATTER_Y)],
                  prevent_initial_call=True)
    def _axes(qis, dataset_id, x, y):
        return handle_axes(services, dataset_id, qis, x, y)

    @app.callback(
        Output(ids.AN_MESSAGE, "children"), Output(ids.AN_REPORT, "children"),
        Output(ids.AN_SCATTER, "figure"), Output(ids.AN_STORE, "data"),
        Output(ids.AN_DOWNLOAD_BTN, "disabled"),
        Input(ids.AN_RUN, "n_clicks"), Input(ids.AN_SCATTER_X, "value"),
        Input(ids.AN_SCATTER_Y, "value"),
        *[State(i, "value") for i in (ids.AN_DATASET, ids.AN_QIS, ids.AN_SENSITIVE, ids.AN_K,
                                      ids.AN_METHOD, ids.AN_SENSITIVE_MODE)],
        State(ids.AN_STORE, "data"), prevent_initial_call=True)
    def _run_cb(_n, x, y, dataset_id, qis, sensitive, k, method, mode, store):
        return handle_run(services, ctx.triggered_id, dataset_id, qis, sensitive, k, method, mode,
                          x, y, store)

    @app.callback(Output(ids.AN_SCATTER_TABLE, "children"), Input(ids.AN_SCATTER, "figure"),
                  prevent_initial_call=True)
    def _scatter_table(figure):
        """The scatter's data table, redrawn with it (the owner's own figure, as text)."""
        return chart_table_children(figure if guard.owner(services) else None)

    @app.callback(Output(ids.AN_DOWNLOAD, "data"), Input(ids.AN_DOWNLOAD_BTN, "n_clicks"),
                  State(ids.AN_STORE, "data"), prevent_initial_call=True)
    def _download(_n, store):
        return handle_download(services, store)
