"""Release page callbacks: identity from the server session, untrusted form values checked,
then ``StudioService`` (which charges every run through the ledger's one door).

A non-owner is refused before anything runs; bad input comes back as a message next to its
column and nothing is charged. Downloads are read from the owner's recent runs on the server
by run id (the browser only holds that id).
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from dash import ALL, Input, Output, State, ctx, dcc, no_update

from dp_engine.errors import DPError
from dp_engine.release import ColumnChoice, Sensitivity, Technique, Tolerances
from dp_engine.release.techniques import ColumnProblemsError
from layouts import ids
from layouts import studio as layout
from services.container import Services
from services.identity import access
from services.studio.model_check import binary_targets
from services.studio.report import dp_csv, report_html, report_json
from services.studio.service import GUARANTEE

log = logging.getLogger(__name__)
FIX_BELOW = "Nothing was run or charged: fix the columns marked below."
GONE = ("This run is no longer kept on the server (only your last few are); run it again for "
        "a new copy.")


def studio_view(services: Services, identity):
    """The Release page for ``identity`` (owners only get the controls)."""
    if not access.is_owner(identity):
        return layout.refusal(GUARANTEE)
    datasets = services.registry.list()
    if not datasets:
        return layout.message("No dataset is loaded yet; add one on the Data page.", "info")
    first = datasets[0]
    return layout.page([(d.id, d.title or d.id) for d in datasets], first.id, first.schema,
                       _targets(first.schema), GUARANTEE)


def _targets(schema) -> list[tuple[str, str]]:
    return [(n, schema.column(n).display) for n in binary_targets(schema, schema.names)]


def _number(v: Any) -> float | None:
    """A finite number from an untrusted value, else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def _by_column(kind: str) -> dict[str, Any]:
    """Column -> value of the pattern-matching state ``kind``, as the browser sent it."""
    out: dict[str, Any] = {}
    for state in ctx.states_list or []:
        for item in state if isinstance(state, list) else []:
            cid = item.get("id") if isinstance(item, dict) else None
            if isinstance(cid, dict) and cid.get("type") == kind and isinstance(
                    cid.get("index"), str):
                out[cid["index"]] = item.get("value")
    return out


def parse_choices() -> tuple[list[ColumnChoice], dict[str, str]]:
    """Per-column choices from the form, and the problems found before the service's own
    checks (an unknown technique or sensitivity)."""
    techs, eps, sens = _by_column(ids.ST_TECH), _by_column(ids.ST_EPS), _by_column(ids.ST_SENS)
    choices: list[ColumnChoice] = []
    problems: dict[str, str] = {}
    for name, tech in techs.items():
        if tech not in {t.value for t in Technique}:
            problems[name] = "choose a technique from the list."
            continue
        mode = sens.get(name) or Sensitivity.RANGE.value
        if mode not in {s.value for s in Sensitivity}:
            problems[name] = "choose a sensitivity from the list."
            continue
        choices.append(ColumnChoice(name, tech, _number(eps.get(name)), mode))
    if not techs:
        problems[""] = "no column was sent; reload the page."
    return choices, problems


def _tolerances(err, ks, corr, match) -> Tolerances:
    return Tolerances(max_privacy_error=_number(err), max_ks=_number(ks),
                      max_corr_diff=_number(corr), min_privacy_match=_number(match))


def _column_messages(problems: dict[str, str]) -> list[str]:
    """One message per column output, in the order the browser listed them."""
    outs = ctx.outputs_list[3] if isinstance(ctx.outputs_list, list) else []
    names = [o["id"]["index"] for o in outs if isinstance(o, dict)]
    return [problems.get(n, "") for n in names]


def _shown(item) -> Any:
    run = item.run
    text = layout.run_summary(run.run_id, run.served.release_id, run.record_epsilon,
                              list(run.copy.kept))
    return layout.results(text, run.answer["metrics"], item.summaries, item.model,
                          item.model_note)


def _trail(result) -> Any:
    tries = [{"scale": t.scale, "cost": t.cost, "failures": list(t.failures),
              "privacy_match": t.metrics.overall("privacy_match"),
              "privacy_error": t.metrics.overall("privacy_error"),
              "ks": max([c.ks for c in t.metrics.columns.values() if math.isfinite(c.ks)],
                        default=None)} for t in result.tries]
    return layout.trail(tries, result.message, result.spent)


def register_callbacks(app, services: Services) -> None:
    """Bind the Release page's callbacks to ``app``."""

    cleared = [Output(ids.ST_RESULTS, "children", allow_duplicate=True),
               Output(ids.ST_TRAIL, "children", allow_duplicate=True),
               Output(ids.ST_LAST, "data", allow_duplicate=True),
               *[Output(b, "disabled", allow_duplicate=True)
                 for b in (ids.ST_DL_CSV, ids.ST_DL_JSON, ids.ST_DL_HTML)]]

    @app.callback(Output(ids.ST_COLUMNS, "children"), Output(ids.ST_TARGET, "options"),
                  Output(ids.ST_TARGET, "value"), *cleared,
                  Input(ids.ST_DATASET, "value"), prevent_initial_call=True)
    def _dataset(dataset_id):
        """Another dataset: its columns and targets; the last run's results are cleared."""
        identity = services.identity.current()
        if not access.is_owner(identity) or not isinstance(dataset_id, str):
            return (no_update,) * 9
        clear = (None, None, None, True, True, True)
        try:
            ds = services.registry.get(dataset_id)
        except DPError:
            return (layout.message("There is no such dataset; choose one from the list."), [],
                    "", *clear)
        return (layout.column_controls(ds.schema),
                layout.target_options(_targets(ds.schema)), "", *clear)

    @app.callback(
        Output(ids.ST_RESULTS, "children"), Output(ids.ST_TRAIL, "children"),
        Output(ids.ST_MESSAGE, "children"),
        Output({"type": ids.ST_COLMSG, "index": ALL}, "children"),
        Output(ids.ST_LAST, "data"), Output(ids.ST_DL_CSV, "disabled"),
        Output(ids.ST_DL_JSON, "disabled"), Output(ids.ST_DL_HTML, "disabled"),
        Input(ids.ST_RUN, "n_clicks"), Input(ids.ST_TUNE, "n_clicks"),
        State(ids.ST_DATASET, "value"), State(ids.ST_TARGET, "value"),
        State({"type": ids.ST_TECH, "index": ALL}, "value"),
        State({"type": ids.ST_EPS, "index": ALL}, "value"),
        State({"type": ids.ST_SENS, "index": ALL}, "value"),
        State(ids.ST_TOL_ERROR, "value"), State(ids.ST_TOL_KS, "value"),
        State(ids.ST_TOL_CORR, "value"), State(ids.ST_TOL_MATCH, "value"),
        State(ids.ST_TUNE_BUDGET, "value"), prevent_initial_call=True)
    def _run(_run_clicks, _tune_clicks, dataset_id, target, _t, _e, _s,
             err, ks, corr, match, budget):
        identity = services.identity.current()
        unchanged = (no_update,) * 4      # last run id and the three download buttons
        if not access.is_owner(identity):
            return (no_update, no_update, layout.message(layout.OWNER_ONLY),
                    _column_messages({}), *unchanged)
        choices, problems = parse_choices()
        target = target if isinstance(target, str) and target else None
        try:
            if problems:
                raise ColumnProblemsError(
                    {**services.studio.problems(identity, str(dataset_id), choices), **problems})
            if ctx.triggered_id == ids.ST_TUNE:
                limit = _number(budget)
                if limit is None or limit <= 0:
                    raise DPError("The auto-tune budget must be a number greater than 0.")
                result, item = services.studio.tune_page(
                    identity, str(dataset_id), choices, _tolerances(err, ks, corr, match),
                    limit, target)
                trail = _trail(result)
            else:
                item, trail = services.studio.run_page(identity, str(dataset_id), choices,
                                                       target), None
        except ColumnProblemsError as exc:
            general = exc.problems.pop("", None)
            return (no_update, no_update, layout.message(general or FIX_BELOW),
                    _column_messages(exc.problems), *unchanged)
        except DPError as exc:
            return (no_update, no_update, layout.message(str(exc)), _column_messages({}),
                    *unchanged)
        if item is None:
            return (None, trail, None, _column_messages({}), None, True, True, True)
        return (_shown(item), trail, None, _column_messages({}), item.run.run_id,
                False, False, False)

    @app.callback(Output(ids.ST_DOWNLOAD, "data"), Output(ids.ST_MESSAGE, "children",
                                                          allow_duplicate=True),
                  Input(ids.ST_DL_CSV, "n_clicks"), Input(ids.ST_DL_JSON, "n_clicks"),
                  Input(ids.ST_DL_HTML, "n_clicks"), State(ids.ST_LAST, "data"),
                  prevent_initial_call=True)
    def _download(_csv, _json, _html, run_id):
        item = services.studio.recent_outcome(services.identity.current(), run_id)
        if item is None:
            return no_update, layout.message(GONE)
        stem = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{item.run.dataset_id}-dp-{item.run.run_id}")
        if ctx.triggered_id == ids.ST_DL_CSV:
            return dcc.send_string(dp_csv(item.run.copy.frame), f"{stem}.csv",
                                   type="text/csv"), no_update
        if ctx.triggered_id == ids.ST_DL_JSON:
            return dcc.send_string(report_json(item.report), f"{stem}-report.json",
                                   type="application/json"), no_update
        return dcc.send_string(report_html(item.report), f"{stem}-report.html",
                               type="text/html"), no_update
