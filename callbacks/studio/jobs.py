"""What the Release page's polls and downloads share: a job's state as page parts, and a
finished job's files. The job belongs to the signed-in user: ``services.studio.job`` finds
nothing for anyone else, and identity is read from the server session on every poll."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dash import dcc, no_update

from layouts.studio import page as layout
from services.studio.outcomes import downloadable
from services.studio.report import report_html, report_json

GONE = ("This run is no longer kept on the server (only your last few are); run it again for "
        "a new copy.")
NOT_READY = "This run has not finished yet; wait for it, then download."
DRAWING = "Done: drawing the results…"
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
