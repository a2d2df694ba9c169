"""Release page, synthetic copy: any signed-in role asks for one, charged to its budget.

The form's values are untrusted: ε, dataset and columns are checked by the service before
anything is queued (a message, nothing charged). The owner's extra options (model-check
target, comparison) are read only for the owner, from pattern-matching ids absent from other
roles' pages. The job runs in the background; an Interval polls it (identity checked each
time) and draws it when done. Downloads come from the user's own runs on the server.
"""

from __future__ import annotations

from typing import Any

from dash import ALL, Input, Output, State, ctx, no_update

from callbacks.studio.jobs import by_column, register_job, started
from dp_engine.errors import DPError
from dp_engine.release.synthetic import synth_domain
from dp_engine.schema import Schema
from layouts import ids
from layouts.studio import page as base
from layouts.studio import synthetic as layout
from services.identity import access
from services.studio.model_check import binary_targets
from services.studio.service import AskFirst
from services.studio.synthetic import GUARANTEE, check_epsilon

PROGRESS_NAME = "Progress of the synthetic copy"


def targets(schema: Schema) -> list[tuple[str, str]]:
    """(name, label) of the yes/no columns a model check can predict (public schema)."""
    return [(n, schema.column(n).display) for n in binary_targets(schema, schema.names)]


def columns_of(schema: Schema) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(name, label) of the columns a synthetic copy can hold, and label -> why not."""
    try:
        domain = synth_domain(schema)
    except DPError as exc:
        return [], {"every column": str(exc)}
    return ([(n, schema.column(n).display) for n in domain.names],
            {schema.column(k).display: v for k, v in domain.skipped.items()})


def section(services, identity, datasets) -> Any:
    """The synthetic card for ``identity`` over the datasets it may query."""
    first = datasets[0]
    columns, skipped = columns_of(first.schema)
    owner = access.is_owner(identity)
    return layout.section([(d.id, d.title or d.id) for d in datasets], first.id, columns,
                          skipped, GUARANTEE, owner=owner,
                          targets=targets(first.schema) if owner else ())


def _owner_options() -> tuple[str | None, bool]:
    """(target, compare) from the owner's pattern-matching controls, as the browser sent."""
    values = by_column(ids.ST_SYN_OWNER)
    target = values.get("target")
    compare = values.get("compare")
    return (target if isinstance(target, str) and target else None,
            isinstance(compare, list) and "compare" in compare)


def _columns(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DPError("Choose the columns from the list.")
    if not value:
        raise DPError("Choose at least one column to synthesize.")
    return value


def register_callbacks(app, services) -> None:
    """Bind the synthetic copy's callbacks to ``app``."""
    buttons = (ids.ST_SYN_DL_CSV, ids.ST_SYN_DL_JSON, ids.ST_SYN_DL_HTML)

    @app.callback(Output(ids.ST_SYN_RUN, "children"),
                  Output(ids.ST_SYN_CONFIRM_BOX, "hidden", allow_duplicate=True),
                  Input(ids.ST_SYN_EPS, "value"), prevent_initial_call=True)
    def _label(epsilon):
        """The button's price follows ε; a pending confirmation is for the old ε: gone."""
        try:
            return layout.run_label(check_epsilon(epsilon)), True
        except DPError:
            return layout.run_label(None), True

    @app.callback(Output(ids.ST_SYN_COLUMNS, "options"), Output(ids.ST_SYN_COLUMNS, "value"),
                  Output(ids.ST_SYN_SKIPPED, "children"),
                  Output({"type": ids.ST_SYN_OWNER, "index": ALL}, "options"),
                  Input(ids.ST_SYN_DATASET, "value"), prevent_initial_call=True)
    def _dataset(dataset_id):
        """Another dataset: its synthesizable columns (public schema) and targets."""
        identity = services.identity.current()
        owner_outputs = ctx.outputs_list[3] if isinstance(ctx.outputs_list, list) else []
        try:
            ds = services.registry.get(str(dataset_id), owner=access.is_owner(identity))
        except DPError as exc:
            return [], [], str(exc), [no_update for _ in owner_outputs]
        columns, skipped = columns_of(ds.schema)
        opts = {"target": base.target_options(targets(ds.schema)) if access.is_owner(identity)
                else no_update}
        return (layout.column_options(columns), [n for n, _ in columns],
                layout.skipped_text(skipped),
                [opts.get(o["id"]["index"], no_update) for o in owner_outputs])

    @app.callback(
        Output(ids.ST_SYN_JOB, "data"), Output(ids.ST_SYN_POLL, "disabled"),
        Output(ids.ST_SYN_PROGRESS, "children"), Output(ids.ST_SYN_MESSAGE, "children"),
        Output(ids.ST_SYN_RESULTS, "children"), *[Output(b, "disabled") for b in buttons],
        Output(ids.ST_SYN_CONFIRM, "children"),
        Output(ids.ST_SYN_CONFIRM_BOX, "hidden"), Output(ids.ST_SYN_PENDING, "data"),
        Input(ids.ST_SYN_RUN, "n_clicks"), Input(ids.ST_SYN_CONFIRM, "n_clicks"),
        State(ids.ST_SYN_DATASET, "value"), State(ids.ST_SYN_EPS, "value"),
        State(ids.ST_SYN_COLUMNS, "value"), State(ids.ST_SYN_PENDING, "data"),
        State({"type": ids.ST_SYN_OWNER, "index": ALL}, "value"), prevent_initial_call=True)
    def _make(_clicks, _confirm, dataset_id, epsilon, columns, pending, _owner):
        """Check the request, then queue it and start polling (nothing charged on refusal).
        A large spend of a non-owner asks first: the price on a confirm button, which
        queues exactly the request it was shown for."""
        identity = services.identity.current()
        target, compare = _owner_options() if access.is_owner(identity) else (None, False)
        request = {"dataset": str(dataset_id), "epsilon": epsilon, "columns": columns}
        confirmed = ctx.triggered_id == ids.ST_SYN_CONFIRM and pending == request
        unchanged = (no_update,) * 3           # the three download buttons
        try:
            token = services.studio.start_synthetic(
                identity, str(dataset_id), epsilon, columns=_columns(columns), target=target,
                compare=compare, confirmed=confirmed)
        except AskFirst as exc:
            return (no_update, no_update, None, base.message(str(exc), "info"), no_update,
                    *unchanged, layout.confirm_label(exc.price), False, request)
        except DPError as exc:
            return (no_update, no_update, None, base.message(str(exc)), no_update,
                    *unchanged, no_update, True, None)
        return (token, False, started(services.studio.job(identity, token), PROGRESS_NAME),
                None, None, True, True, True, no_update, True, None)

    register_job(app, services, kind="synthetic", name=PROGRESS_NAME, poll=ids.ST_SYN_POLL,
                 token=ids.ST_SYN_JOB, progress=ids.ST_SYN_PROGRESS, results=ids.ST_SYN_RESULTS,
                 message=ids.ST_SYN_MESSAGE, buttons=buttons, download=ids.ST_SYN_DOWNLOAD,
                 cancel=ids.ST_SYN_CANCEL,
                 render=lambda _record, result: (
                     layout.results(result) if result.get("kind") == "synthetic" else None,))
