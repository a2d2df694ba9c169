"""Release studio (``/release``) callbacks: identity from the server session, untrusted form
values checked, then ``StudioService`` (which charges every run through the ledger's one door).

A per-record run is the owner's only: a non-owner is refused before anything runs; bad input
comes back as a message next to its column and nothing is charged. A valid run is queued as a
background job on the runner (``services.runner.jobs``); an Interval polls its progress and
draws it when it is done. Downloads are read from the user's runs on the server by the job's
token (the browser only holds that token; ``callbacks.studio.jobs``). The synthetic copy's
callbacks: ``callbacks.studio.synthetic``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from dash import ALL, Input, Output, State, ctx, no_update

from callbacks import guard
from callbacks.studio import synthetic as studio_synthetic
from callbacks.studio.jobs import by_column, register_job, started
from dp_engine.errors import DPError
from dp_engine.release import ColumnChoice, Sensitivity, Technique, Tolerances
from dp_engine.release.techniques import ColumnProblemsError
from layouts import ids
from layouts.studio import page as layout
from services.container import Services
from services.identity import access
from services.identity.roles import Role
from services.studio.outcomes import downloadable, verdict
from services.studio.service import GUARANTEE

log = logging.getLogger(__name__)
FIX_BELOW = "Nothing was run or charged: fix the columns marked below."
PROGRESS_NAME = "Progress of the per-record copy"
_targets = studio_synthetic.targets


def studio_view(services: Services, identity, _path: str = "/release"):
    """The Release page for ``identity``: the synthetic copy for every role, the per-record
    controls for the owner only."""
    datasets = access.queryable(identity, services.registry.list())
    if not datasets:
        return layout.message("No dataset is available yet; the data owner adds them on the "
                              "Data page.", "info")
    synthetic = studio_synthetic.section(services, identity, datasets)
    if not access.is_owner(identity):
        return layout.non_owner_page(synthetic)
    first = datasets[0]
    return layout.page([(d.id, d.title or d.id) for d in datasets], first.id, first.schema,
                       _targets(first.schema), GUARANTEE, synthetic)


PAGE = guard.Page("studio", "/release", "Release", Role.THIRD_PARTY, studio_view)
"""The release studio, at /release (its label and title: Release)."""


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


def parse_choices() -> tuple[list[ColumnChoice], dict[str, str]]:
    """Per-column choices from the form, and the problems found before the service's own
    checks (an unknown technique or sensitivity)."""
    techs, eps, sens = by_column(ids.ST_TECH), by_column(ids.ST_EPS), by_column(ids.ST_SENS)
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


def _shown(result: dict[str, Any]) -> tuple[Any, Any]:
    """(results, trail) of a finished per-record job: the verdict first."""
    if result.get("kind") != "record":
        return None, None
    trail = result.get("trail")
    trail_view = layout.trail(trail["tries"], trail["message"], trail["spent"]) if trail \
        else None
    said = result.get("verdict") or verdict(trail, result.get("record_epsilon"))
    if not result.get("run_id"):
        return layout.verdict_line(said), trail_view
    text = layout.run_summary(result["run_id"], result["release_id"], result["record_epsilon"],
                              result["kept"])
    return layout.results(said, text, result["metrics"], result["summaries"],
                          result["model"], result["model_note"]), trail_view


def _insist_hidden(record: dict[str, Any] | None) -> bool:
    """Whether the "download anyway" box stays hidden: shown only under a finished run
    whose verdict failed and whose files the owner has not yet taken."""
    result = (record or {}).get("result") or {}
    return not (record is not None and record.get("state") == "done"
                and result.get("run_id") and not downloadable(result))


def register_callbacks(app, services: Services) -> None:
    """Bind the Release page's callbacks to ``app`` (the synthetic copy's too)."""
    studio_synthetic.register_callbacks(app, services)
    buttons = (ids.ST_DL_CSV, ids.ST_DL_JSON, ids.ST_DL_HTML)
    cleared = [Output(ids.ST_RESULTS, "children", allow_duplicate=True),
               Output(ids.ST_TRAIL, "children", allow_duplicate=True),
               Output(ids.ST_LAST, "data", allow_duplicate=True),
               *[Output(b, "disabled", allow_duplicate=True) for b in buttons]]

    @app.callback(Output(ids.ST_COLUMNS, "children"), Output(ids.ST_TARGET, "options"),
                  Output(ids.ST_TARGET, "value"), *cleared,
                  Input(ids.ST_DATASET, "value"), prevent_initial_call=True)
    def _dataset(dataset_id):
        """Another dataset: its columns and targets; the last run's results are cleared."""
        if guard.owner(services) is None or not isinstance(dataset_id, str):
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
        Output(ids.ST_LAST, "data"), *[Output(b, "disabled") for b in buttons],
        Output(ids.ST_POLL, "disabled"), Output(ids.ST_PROGRESS, "children"),
        Output(ids.ST_INSIST_BOX, "hidden"), Output(ids.ST_INSIST, "value"),
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
        """Check the form, then queue the run (or auto-tune) and start polling it."""
        identity = guard.owner(services)
        unchanged = (no_update,) * 8      # token, 3 downloads, poll, progress, insist box
        if identity is None:
            return (no_update, no_update, layout.message(layout.OWNER_ONLY),
                    _column_messages({}), *unchanged)
        choices, problems = parse_choices()
        target = target if isinstance(target, str) and target else None
        try:
            if problems:
                raise ColumnProblemsError(
                    {**services.studio.problems(identity, str(dataset_id), choices), **problems})
            tune = None
            if ctx.triggered_id == ids.ST_TUNE:
                limit = _number(budget)
                if limit is None or limit <= 0:
                    raise DPError("The auto-tune budget must be a number greater than 0.")
                tune = (_tolerances(err, ks, corr, match), limit)
            token = services.studio.start_record(identity, str(dataset_id), choices, target,
                                                 tune=tune)
        except ColumnProblemsError as exc:
            general = exc.problems.pop("", None)
            return (no_update, no_update, layout.message(general or FIX_BELOW),
                    _column_messages(exc.problems), *unchanged)
        except DPError as exc:
            return (no_update, no_update, layout.message(str(exc)), _column_messages({}),
                    *unchanged)
        return (None, None, None, _column_messages({}), token, True, True, True, False,
                started(services.studio.job(identity, token), PROGRESS_NAME), True, [])

    register_job(app, services, kind="dp", name=PROGRESS_NAME, poll=ids.ST_POLL,
                 token=ids.ST_LAST, progress=ids.ST_PROGRESS, results=ids.ST_RESULTS,
                 message=ids.ST_MESSAGE, buttons=buttons, download=ids.ST_DOWNLOAD,
                 cancel=ids.ST_CANCEL,
                 render=lambda record, result: (*_shown(result), _insist_hidden(record)),
                 extra=((ids.ST_TRAIL, "children"), (ids.ST_INSIST_BOX, "hidden")),
                 waiting=(no_update, True))

    @app.callback(*[Output(b, "disabled", allow_duplicate=True) for b in buttons],
                  Output(ids.ST_MESSAGE, "children", allow_duplicate=True),
                  Input(ids.ST_INSIST, "value"), State(ids.ST_LAST, "data"),
                  prevent_initial_call=True)
    def _insist(value, token):
        """The owner ticks "download anyway": recorded (run and ledger), files handed out;
        unticked, the buttons are off again (what was recorded stays)."""
        identity = guard.owner(services)
        if identity is None:
            return True, True, True, layout.message(layout.OWNER_ONLY)
        if not (isinstance(value, list) and "insist" in value):
            return True, True, True, None
        try:
            record = services.studio.insist(identity, token)
        except DPError as exc:
            return True, True, True, layout.message(str(exc))
        result = record.get("result") or {}
        return False, False, False, layout.message(
            f"Recorded: {identity.user} took the files of run {result.get('run_id')} although "
            f"it failed its tolerances (ledger release #{result.get('release_id')}, delivery "
            "logged).", "warning")
