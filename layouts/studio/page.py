"""Release page (issue 15): a per-record DP copy of a table, its metrics, plots, model check,
auto-tune and downloads (the owner's), beside the central-DP synthetic copy
(``layouts.studio_synthetic``, every role). Long runs show a progress bar while they work.

Layout only: every number shown comes from a run's outcome (``services.studio``); the
controls list public schema metadata (kind, bounds, categories). Wiring in
``callbacks.studio``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import dash_bootstrap_components as dbc
from dash import dcc, html

from dp_engine.release import Sensitivity, Technique, default_technique, techniques_for
from dp_engine.schema import NUMERIC_KINDS, ColumnSpec, Schema
from layouts import ids
from layouts.components.accessible import data_table
from layouts.components.figures import fmt
from layouts.components.graph_config import GRAPH_CONFIG
from layouts.studio import figures as figs
from services.data.review import readable

DEFAULT_EPSILON = 1.0
OWNER_ONLY = ("Per-record copies are the data owner's only: they are local, not central, "
              "differential privacy. You may ask for the synthetic copy below (central DP, "
              "charged to your role's budget).")
POLL_MS = 400
METRICS = (("privacy_match", "Privacy Match %"), ("digimatch", "DigiMatch %"),
           ("privacy_error", "Error %"), ("mean_original", "mean (original)"),
           ("mean_dp", "mean (DP)"), ("std_original", "sd (original)"), ("std_dp", "sd (DP)"),
           ("wasserstein", "Wasserstein"), ("ks", "KS"),
           ("total_variation", "share distance"))


def message(text: str | list, colour: str = "warning") -> dbc.Alert:
    return dbc.Alert(text, color=colour, className="py-2 small")


def _labelled(label: str, cid: str, control, help_text: str = "") -> html.Div:
    children = [html.Label(label, htmlFor=cid, className="form-label fw-semibold small mb-1"),
                control]
    if help_text:
        children.append(dbc.FormText(help_text))
    return html.Div(children, className="mb-2")


def dom_id(cid: str | dict) -> str:
    """The DOM id Dash gives a component id (a pattern-matching dict: keys sorted)."""
    return cid if isinstance(cid, str) else json.dumps(cid, sort_keys=True,
                                                       separators=(",", ":"),
                                                       ensure_ascii=False)


def _hidden_label(text: str, control) -> html.Div:
    """A control with a ``<label for>`` only screen readers read (table cells)."""
    return html.Div([html.Label(text, htmlFor=dom_id(control.id), className="visually-hidden"),
                     control])


def guarantee(text: str) -> dbc.Alert:
    return dbc.Alert([html.Strong("What this protects. "), text], color="info",
                     className="small studio-guarantee")


def non_owner_page(synthetic) -> html.Div:
    """What a non-owner sees: why there are no per-record copies, and the synthetic copy."""
    return html.Div([html.H1("Release studio", className="h4"), message(OWNER_ONLY, "info"),
                     synthetic], id=ids.ST_PAGE)


def job_progress(fraction: float, text: str, name: str) -> html.Div:
    """A running job: its step as text, and a progress bar named ``name`` (the text sits
    above the bar, so it stays readable however short the bar is)."""
    pct = max(0.0, min(float(fraction), 1.0)) * 100
    return html.Div([
        html.P(f"{text} ({pct:.0f} %)", className="small mb-1"),
        html.Div(html.Div(className="progress-bar progress-bar-striped progress-bar-animated",
                          style={"width": f"{pct:.0f}%"}),
                 className="progress", role="progressbar",
                 **{"aria-label": name, "aria-valuenow": f"{pct:.0f}", "aria-valuemin": "0",
                    "aria-valuemax": "100", "aria-valuetext": f"{text} {pct:.0f} %"}),
    ], className="my-2 studio-progress")


def download_buttons(buttons: tuple[str, str, str], csv_label: str) -> list[dbc.Button]:
    """The CSV, JSON report and HTML report buttons of a run, off until it has files."""
    return [dbc.Button(label, id=cid, color="secondary", disabled=True)
            for cid, label in zip(buttons, (csv_label, "Report (JSON)", "Report (HTML)"),
                                  strict=True)]


def cancel_button(cid: str, what: str) -> html.Button:
    """Stops the running job ``what`` names; shown only while one runs (its poll shows it)."""
    return html.Button(f"Cancel the {what}", id=cid, type="button", hidden=True,
                       className="btn btn-outline-danger btn-sm mb-2")


def poll(cid: str) -> dcc.Interval:
    """The Interval that polls a job; off until a job starts, off again when it ends."""
    return dcc.Interval(id=cid, interval=POLL_MS, disabled=True)


def _public(spec: ColumnSpec) -> str:
    """The column's public metadata as text: bounds and/or categories. Bounds are written as
    people write them (a year reads 2017, never 2.02e+03)."""
    parts = []
    if spec.has_bounds:
        parts.append(f"{readable(spec.lower)} to {readable(spec.upper)}")
    if spec.categories:
        cats = ", ".join(str(c) for c in spec.categories[:8])
        parts.append(cats + (" …" if len(spec.categories) > 8 else ""))
    return "; ".join(parts) or "—"


def _column_row(spec: ColumnSpec) -> html.Tr:
    name, label = spec.name, spec.display
    options = [{"label": t.label, "value": t.value} for t in techniques_for(spec)]
    cells = [html.Th(label, scope="row", className="small"),
             html.Td(spec.kind.value.replace("_", " "), className="small"),
             html.Td(_public(spec), className="small text-muted"),
             html.Td(_hidden_label(f"Technique for {label}", dbc.Select(
                 id={"type": ids.ST_TECH, "index": name}, options=options, size="sm",
                 value=default_technique(spec).value, style={"minWidth": "13rem"})))]
    uses_eps = any(t.uses_epsilon for t in techniques_for(spec))
    cells.append(html.Td(_hidden_label(f"ε per cell for {label}", dbc.Input(
        id={"type": ids.ST_EPS, "index": name}, type="number", min=0, step="any",
        value=DEFAULT_EPSILON, size="sm", style={"width": "6rem"})) if uses_eps else "—"))
    sens = [{"label": "public range", "value": Sensitivity.RANGE.value},
            {"label": "1 (one unit)", "value": Sensitivity.ONE.value}]
    cells.append(html.Td(_hidden_label(f"Sensitivity for {label}", dbc.Select(
        id={"type": ids.ST_SENS, "index": name}, options=sens, size="sm",
        value=Sensitivity.RANGE.value)) if spec.kind in NUMERIC_KINDS else "—"))
    cells.append(html.Td(html.Div(id={"type": ids.ST_COLMSG, "index": name},
                                  className="small text-danger", role="status")))
    return html.Tr(cells)


def column_controls(schema: Schema) -> html.Div:
    """One row per column: public metadata, technique, ε, sensitivity, its message."""
    head = ["column", "kind", "public bounds / categories", "technique", "ε per cell",
            "sensitivity", "problem"]
    return html.Div([
        dbc.Table([html.Thead(html.Tr([html.Th(h, scope="col") for h in head])),
                   html.Tbody([_column_row(c) for c in schema.columns])],
                  size="sm", responsive=True, className="align-middle studio-columns"),
        html.P(f"{Technique.KEEP.label}: the column is copied unchanged and is NOT private; "
               "the report flags it. Sensitivity 1 only protects changes of at most one unit.",
               className="small text-muted"),
    ])


def target_options(targets: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"label": "no model check", "value": ""},
            *[{"label": label, "value": name} for name, label in targets]]


def _number(label: str, cid: str, value: float | None, help_text: str = "") -> dbc.Col:
    return dbc.Col(_labelled(label, cid, dbc.Input(id=cid, type="number", min=0, step="any",
                                                   value=value, size="sm"), help_text), md=2)


def page(datasets: Sequence[tuple[str, str]], first: str, schema: Schema,
         targets: Sequence[tuple[str, str]], guarantee_text: str, synthetic) -> html.Div:
    """The owner's Release page."""
    tolerances = dbc.Row([
        _number("Largest Error %", ids.ST_TOL_ERROR, 20.0),
        _number("Largest KS distance", ids.ST_TOL_KS, 0.2),
        _number("Largest correlation difference", ids.ST_TOL_CORR, 0.2),
        _number("Smallest Privacy Match %", ids.ST_TOL_MATCH, None, "empty: not checked"),
        _number("Auto-tune budget (total ε)", ids.ST_TUNE_BUDGET, 40.0,
                "the sum of every try's ε per record"),
    ], className="g-2")
    return html.Div([
        html.H1("Release studio", className="h4"),
        guarantee(guarantee_text),
        dbc.Row([
            dbc.Col(_labelled("Dataset", ids.ST_DATASET, dbc.Select(
                id=ids.ST_DATASET, value=first,
                options=[{"label": t, "value": i} for i, t in datasets])), md=4),
            dbc.Col(_labelled("Model check target (yes/no column)", ids.ST_TARGET, dbc.Select(
                id=ids.ST_TARGET, value="", options=target_options(targets))), md=4),
        ]),
        html.Div(column_controls(schema), id=ids.ST_COLUMNS),
        html.H2("Auto-tune tolerances", className="h6 mt-2"),
        tolerances,
        html.Div([
            dbc.Button("Run", id=ids.ST_RUN, color="primary"),
            dbc.Button("Auto-tune", id=ids.ST_TUNE, color="dark", outline=True),
            *download_buttons((ids.ST_DL_CSV, ids.ST_DL_JSON, ids.ST_DL_HTML),
                              "Download DP CSV"),
        ], className="d-flex flex-wrap gap-2 my-3"),
        insist_box(),
        dcc.Download(id=ids.ST_DOWNLOAD),
        dcc.Store(id=ids.ST_LAST),
        poll(ids.ST_POLL),
        html.Div(id=ids.ST_MESSAGE, role="status"),
        html.Div(id=ids.ST_PROGRESS),
        cancel_button(ids.ST_CANCEL, "run"),
        html.Div(id=ids.ST_TRAIL), html.Div(id=ids.ST_RESULTS),
        synthetic,
    ], id=ids.ST_PAGE)


INSIST_LABEL = ("Download anyway: I take this copy although it failed its tolerances "
                "(recorded in the ledger under my name)")


def insist_box() -> html.Div:
    """The owner's explicit "download anyway" under a failed run (hidden otherwise)."""
    return html.Div(dbc.Checklist(id=ids.ST_INSIST, value=[], options=[
        {"label": INSIST_LABEL, "value": "insist"}], className="small"),
        id=ids.ST_INSIST_BOX, hidden=True, className="mb-2")


# ---- results ---------------------------------------------------------------------------------

def verdict_line(said: Mapping[str, Any]) -> dbc.Alert:
    """The run's one-line verdict: green when it passed, red when it failed."""
    ok = bool(said.get("ok"))
    return dbc.Alert(html.Strong(str(said.get("text", ""))), color="success" if ok else "danger",
                     className=f"py-2 small studio-verdict {'passed' if ok else 'failed'}")


def _chart(fig: figs.Figure, table: figs.Table, caption: str, md: int = 6) -> dbc.Col:
    return dbc.Col([dcc.Graph(figure=fig, config=GRAPH_CONFIG, className="studio-graph"),
                    html.Details([html.Summary("Data table", className="small"),
                                  data_table(table, caption)])], md=md)


def _pct(v: Any) -> str:
    return "–" if v is None else fmt(float(v))


def metrics_table(metrics: Mapping[str, Any], labels: Mapping[str, str]) -> dbc.Table:
    rows = [[labels.get(name, name), *[_pct(m.get(k)) for k, _ in METRICS]]
            for name, m in metrics["columns"].items()]
    overall = metrics["overall"]
    rows.append(["all columns (mean)", _pct(overall.get("privacy_match")),
                 _pct(overall.get("digimatch")), _pct(overall.get("privacy_error")),
                 *["" for _ in METRICS[3:]]])
    return data_table((["column", *[h for _, h in METRICS]], rows),
                      "Privacy and utility per column: original vs DP copy")


def model_table(model: Mapping[str, Any], copy_label: str = "DP copy") -> html.Div:
    rows = [[who, *[fmt(model[key][k]) for k in ("precision", "recall", "accuracy", "auc")]]
            for who, key in (("trained on original", "original"),
                             (f"trained on {copy_label}", "dp"))]
    clusters = [[f"cluster {n + 1}", f"{100 * a:.1f} %", f"{100 * b:.1f} %"]
                for n, (a, b) in enumerate(zip(model["cluster_original"], model["cluster_dp"],
                                               strict=False))]
    return html.Div([
        html.H2(f"Model check: predicting {model['target']}", className="h6"),
        data_table((["model", "precision", "recall", "accuracy", "ROC AUC"], rows),
                   f"Logistic regression, tested on {model['test_rows']} held-out original "
                   "rows"),
        data_table((["k-means cluster", "original share", f"{copy_label} share"], clusters),
                   "Cluster shares (centres found on the original)"),
        html.P(model.get("note") or "", className="small text-muted"),
    ], className="studio-model")


def run_summary(run_id: str, release_id: int, record_eps: float, kept: Sequence[str]) -> dbc.Alert:
    text = [f"Run {run_id} recorded in the ledger as release #{release_id}: loss per record "
            f"Σ ε = {fmt(record_eps)} (local DP, not central DP; outside the role budgets)."]
    if kept:
        text.append(html.Strong(f" Kept as is, NOT private: {', '.join(kept)}."))
    return dbc.Alert(text, color="secondary", className="py-2 small")


def results(said: Mapping[str, Any], run_text: dbc.Alert, metrics: Mapping[str, Any],
            summaries: Mapping[str, Any], model: Mapping[str, Any] | None,
            model_note: str) -> html.Div:
    """The verdict, then metrics table, per-column plots with tables, correlation heatmaps,
    model check."""
    labels = {n: c["label"] for n, c in summaries["columns"].items()}
    parts = [verdict_line(said), run_text, html.H2("Metrics", className="h6"),
             metrics_table(metrics, labels),
             html.P(f"Largest correlation difference: {fmt(metrics.get('corr_max_diff'))}",
                    className="small"), *plots(summaries)]
    if model:
        parts.append(model_table(model))
    elif model_note:
        parts.append(message(model_note, "secondary"))
    return html.Div(parts, className="studio-results")


def plots(summaries: Mapping[str, Any]) -> list:
    """Per column a histogram and box (numbers) or pies (categories), each with its data
    table; correlation heatmaps when there are any."""
    charts: list = []
    for item in summaries["columns"].values():
        name = item["label"]
        if "edges" in item:
            charts += [_chart(figs.histogram(item), figs.histogram_table(item),
                              f"{name}: rows per bin"),
                       _chart(figs.box(item), figs.box_table(item),
                              f"{name}: five numbers")]
        elif "shares_dp" in item:
            charts.append(_chart(figs.pies(item), figs.pies_table(item),
                                 f"{name}: category shares"))
    corr = summaries["corr"]
    heat: list = []
    if len(corr["names"]) >= 2:
        sides = [s for s in ("original", "dp") if corr.get(s) is not None]
        heat = [dbc.Row([dbc.Col(dcc.Graph(figure=figs.heatmap(corr, s), config=GRAPH_CONFIG,
                                           className="studio-graph"), md=6) for s in sides]),
                html.Details([html.Summary("Data table", className="small"),
                              data_table(figs.correlation_table(corr),
                                         "Correlation of each pair: original vs DP copy")])]
    return [html.H2("Plots", className="h6"), dbc.Row(charts, className="g-2"), *heat]


def trail(tries: Sequence[Mapping[str, Any]], stopped_message: str, spent: float) -> html.Div:
    """The auto-tune trail: every try, its cost and what it missed."""
    rows = [[str(n + 1), fmt(t["scale"]), fmt(t["cost"]), _pct(t["privacy_match"]),
             _pct(t["privacy_error"]), _pct(t["ks"]), "met" if not t["failures"] else
             "; ".join(t["failures"])] for n, t in enumerate(tries)]
    return html.Div([
        html.H2("Auto-tune trail", className="h6"),
        data_table((["try", "ε × ", "cost (ε per record)", "Privacy Match %", "Error %",
                     "largest KS", "tolerances"], rows),
                   "Every try was a charged run, recorded in the ledger"),
        message(f"{stopped_message} Spent ε = {fmt(spent)} per record over "
                f"{len(tries)} tries.", "info"),
    ], className="studio-trail")

