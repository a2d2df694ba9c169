"""What the Release page's polls and downloads share: a job's state as page parts, and a
finished job's files. The job belongs to the signed-in user: ``services.studio.job`` finds
nothing for anyone else, and identity is read from the server session on every poll."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from dash import Input, Output, State, ctx, dcc, no_update

from layouts.studio import page as layout
from services.studio.outcomes import downloadable
from services.studio.report import report_html, report_json

GONE = ("This run is no longer kept on the server (only your last few are); run it again for "
        "a new copy.")
NOT_READY = "This run has not finished yet; wait for it, then download."
DRAWING = "Done: drawing the results…"
CANCELLING = "Cancelling the run… it stops at its next step; the page says when it has."
HELD_BACK = ("This copy failed its tolerances, so its files are held back. Tick 'Download "
             "anyway' under the buttons to take them (recorded in the ledger).")


def poll_view(record: dict[str, Any] | None, render: Callable[[dict[str, Any]], Any],
              name: str, announced: Callable[[], bool] = lambda: True,
              ) -> tuple[Any, Any, Any, bool, bool]:
    """(progress, results, message, poll disabled, downloads disabled) for a job's state;
    ``render`` draws a finished job's result; ``name`` names the progress bar.

    ``announced()`` says whether a poll already showed the job as done (and marks it so):
    the first poll that finds it done shows "drawing the results" at 100 % and the next one
    sends the results, so the bar does not sit on the job's last stage while the browser
    draws a page of charts."""
    if record is None:
        return None, no_update, layout.message(GONE), True, True
    state = record.get("state")
    if state == "done" and not announced():
        return layout.job_progress(1.0, DRAWING, name), no_update, no_update, False, True
    if state == "done":
        result = record.get("result") or {}
        return None, render(result), None, True, not downloadable(result)
    if state == "error":
        return None, no_update, layout.message(str(record.get("text"))), True, True
    return (layout.job_progress(float(record.get("progress") or 0), str(record.get("text")),
                                name), no_update, no_update, False, True)


def by_column(kind: str) -> dict[str, Any]:
    """Index -> value of the pattern-matching state ``kind``, as the browser sent it (only
    string indexes: a column's name, or an option's)."""
    out: dict[str, Any] = {}
    for state in ctx.states_list or []:
        for item in state if isinstance(state, list) else []:
            cid = item.get("id") if isinstance(item, dict) else None
            if isinstance(cid, dict) and cid.get("type") == kind and isinstance(
                    cid.get("index"), str):
                out[cid["index"]] = item.get("value")
    return out


def register_job(app, services, *, kind: str, name: str, poll: str, token: str, progress: str,
                 results: str, message: str, buttons: tuple[str, str, str], download: str,
                 cancel: str,
                 render: Callable[[dict[str, Any], dict[str, Any]], tuple],
                 extra: Sequence[tuple[str, str]] = (), waiting: tuple = ()) -> None:
    """The poll and download callbacks of one kind of job (the per-record copy, the synthetic
    one). The poll shows the job ``token``'s progress, then its result (identity checked on
    every poll): ``render(record, result)`` draws a finished job as (results, *the values of
    the ``extra`` outputs), which are ``waiting`` until then. The buttons (CSV, JSON, HTML)
    download a finished job's files; ``cancel`` stops the job while it runs."""
    dup = {"allow_duplicate": True}

    @app.callback(Output(progress, "children", **dup), Output(results, "children", **dup),
                  Output(message, "children", **dup), Output(poll, "disabled", **dup),
                  *[Output(b, "disabled", **dup) for b in buttons],
                  Output(cancel, "hidden", **dup),
                  *[Output(cid, prop, **dup) for cid, prop in extra],
                  Input(poll, "n_intervals"), State(token, "data"), prevent_initial_call=True)
    def _poll(_n, job_token):
        record = services.studio.job(services.identity.current(), job_token)
        drawn: list = []

        def draw(result: dict[str, Any]) -> Any:
            drawn[:] = render(record, result)
            return drawn[0]

        bar, shown, msg, stop, no_files = poll_view(
            record, draw, name,
            lambda: services.studio.announced(services.identity.current(), job_token))
        return (bar, shown, msg, stop, no_files, no_files, no_files, stop,
                *(drawn[1:] if drawn else waiting))

    @app.callback(Output(message, "children", **dup), Output(cancel, "hidden", **dup),
                  Input(cancel, "n_clicks"), State(token, "data"), prevent_initial_call=True)
    def _cancel(clicks, job_token):
        if not clicks or not services.studio.cancel(services.identity.current(), job_token):
            return no_update, no_update      # not this user's job, or it already ended
        return layout.message(CANCELLING), True

    @app.callback(Output(download, "data"), Output(message, "children", **dup),
                  *[Input(b, "n_clicks") for b in buttons], State(token, "data"),
                  prevent_initial_call=True)
    def _download(_csv, _json, _html, job_token):
        which = {buttons[0]: "csv", buttons[1]: "json"}.get(ctx.triggered_id, "html")
        return send(services, job_token, kind, which)


def started(record: dict[str, Any] | None, name: str) -> Any:
    """The bar drawn as a job is queued: the job's own state, read from the store at once
    (its stage and percent, not a fixed "waiting" line); the polls take it from there."""
    rec = record or {}
    return layout.job_progress(float(rec.get("progress") or 0.0),
                               str(rec.get("text") or "Queued…"), name)


def send(services, token: object, kind: str, which: str) -> tuple[Any, Any]:
    """(download, message) of the user's finished job ``token``: ``which`` is "csv", "json"
    or "html". Nothing for another user's token or a job that has not finished."""
    identity = services.identity.current()
    record = services.studio.job(identity, token)
    if record is None:
        return no_update, layout.message(GONE)
    result = record.get("result") or {}
    if record.get("state") != "done" or not result.get("run_id"):
        return no_update, layout.message(NOT_READY if record.get("state") != "error" else GONE)
    if not downloadable(result):
        return no_update, layout.message(HELD_BACK)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{result['dataset_id']}-{kind}-{result['run_id']}")
    if which == "csv":
        text = services.studio.job_csv(identity, token)
        if text is None:
            return no_update, layout.message(GONE)
        return dcc.send_string(text, f"{stem}.csv", type="text/csv"), no_update
    if which == "json":
        return dcc.send_string(report_json(result["report"]), f"{stem}-report.json",
                               type="application/json"), no_update
    return dcc.send_string(report_html(result["report"]), f"{stem}-report.html",
                           type="text/html"), no_update
