"""Release page, synthetic copy (central DP): its controls and its results, for every role.

Every role sees the controls (dataset, total ε, columns from the public schema), n̂, the ε
charged, the tree, the skipped columns and figures of the SYNTHETIC table. The owner's extra
controls (model-check target, comparison) have pattern-matching ids so the same callback
serves layouts without them; the owner's results add the metrics against the original, the
model check and the side-by-side comparison with a per-record copy at the same total ε.
Layout only: every number comes from the job's result (``services.studio``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dash_bootstrap_components as dbc
from dash import dcc, html

from layouts import ids
from layouts.components.accessible import field
from layouts.components.figures import fmt
from layouts.studio import page as base

DEFAULT_EPSILON = 1.0
INTRO = ("A synthetic table made with central differential privacy: it protects adding or "
         "removing a patient, its ε is charged to your role's budget, and you may download "
         "it. Bounds and categories come from the public schema.")


def owner_id(name: str) -> dict[str, str]:
    return {"type": ids.ST_SYN_OWNER, "index": name}


def run_label(epsilon: Any) -> str:
    """The button's text: what clicking it costs."""
    return f"Make synthetic copy (ε {fmt(epsilon) if isinstance(epsilon, float) else '…'})"


def confirm_label(price: float | None) -> str:
    """The confirm button of a spend that asked first: its exact price on it."""
    return f"Spend ε {price:.3g}: make the copy" if price is not None else "Spend ε …"


def skipped_text(skipped: Mapping[str, str]) -> str:
    if not skipped:
        return ""
    return "Left out: " + "; ".join(f"{k} ({v})" for k, v in skipped.items()) + "."


def column_options(columns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"label": label, "value": name} for name, label in columns]


def _owner_controls(targets: Sequence[tuple[str, str]]) -> dbc.Row:
    """Model-check target and comparison (the owner's only: they read the original)."""
    target = dbc.Select(id=owner_id("target"), value="",
                        options=base.target_options(targets))
    compare = dbc.Checklist(id=owner_id("compare"), value=["compare"], options=[
        {"label": "Also make a per-record copy at the same total ε and compare (charged as a "
                  "per-record run, not central DP)", "value": "compare"}])
    return dbc.Row([
        dbc.Col(html.Div([html.Label("Model check target (owner only)",
                                     htmlFor=base.dom_id(target.id),
                                     className="form-label fw-semibold small mb-1"), target],
                         className="mb-2"), md=4),
        dbc.Col(html.Fieldset([html.Legend("Comparison (owner only)",
                                           className="form-label fw-semibold small mb-1"),
                               html.Div(compare)], className="mb-2"), md=8),
    ])


def section(datasets: Sequence[tuple[str, str]], first: str,
            columns: Sequence[tuple[str, str]], skipped: Mapping[str, str], guarantee_text: str,
            *, owner: bool, targets: Sequence[tuple[str, str]] = ()) -> dbc.Card:
    """The synthetic copy's card: controls, progress, results and downloads."""
    body = [
        html.H2("Synthetic copy (central DP)", className="h5"),
        html.P(INTRO, className="small"),
        base.guarantee(guarantee_text),
        dbc.Row([
            dbc.Col(field("Dataset", dbc.Select(
                id=ids.ST_SYN_DATASET, value=first,
                options=[{"label": t, "value": i} for i, t in datasets]), class_name="mb-2"),
                md=4),
            dbc.Col(field("Total ε", dbc.Input(
                id=ids.ST_SYN_EPS, type="number", min=0, step="any", value=DEFAULT_EPSILON),
                "the whole table's privacy loss, charged once", class_name="mb-2"), md=3),
        ]),
        field("Columns", dbc.Checklist(id=ids.ST_SYN_COLUMNS, inline=True,
                                       options=column_options(columns),
                                       value=[n for n, _ in columns]), class_name="mb-1"),
        html.P(skipped_text(skipped), id=ids.ST_SYN_SKIPPED, className="small text-muted"),
    ]
    if owner:
        body.append(_owner_controls(targets))
    body += [
        html.Div([
            dbc.Button(run_label(DEFAULT_EPSILON), id=ids.ST_SYN_RUN, color="primary"),
            html.Div(dbc.Button(confirm_label(None), id=ids.ST_SYN_CONFIRM, color="warning"),
                     id=ids.ST_SYN_CONFIRM_BOX, hidden=True),
            *base.download_buttons((ids.ST_SYN_DL_CSV, ids.ST_SYN_DL_JSON, ids.ST_SYN_DL_HTML),
                                   "Download synthetic CSV"),
        ], className="d-flex flex-wrap gap-2 my-3"),
        dcc.Download(id=ids.ST_SYN_DOWNLOAD),
        dcc.Store(id=ids.ST_SYN_JOB),
        dcc.Store(id=ids.ST_SYN_PENDING),
        base.poll(ids.ST_SYN_POLL),
        html.Div(id=ids.ST_SYN_MESSAGE, role="status"),
        html.Div(id=ids.ST_SYN_PROGRESS),
        base.cancel_button(ids.ST_SYN_CANCEL, "synthetic copy"),
        html.Div(id=ids.ST_SYN_RESULTS),
    ]
    return dbc.Card(dbc.CardBody(body), id=ids.ST_SYNTHETIC, className="my-3 studio-synthetic")


# ---- results ---------------------------------------------------------------------------------

def _summary(r: Mapping[str, Any]) -> dbc.Alert:
    return dbc.Alert(
        f"Synthetic copy {r['run_id']}: n̂ = {r['rows']:,} rows (a noisy count). ε charged = "
        f"{fmt(r['epsilon'])} to your role's budget (requested {fmt(r['requested_epsilon'])}),"
        f" recorded in the ledger as release #{r['release_id']}. Central DP: it protects "
        "adding or removing a patient.", color="success", className="py-2 small")


def _tree(r: Mapping[str, Any]) -> list:
    labels = r.get("labels", {})
    rows = [[labels.get(a, a), labels.get(b, b)] for a, b in r["edges"]]
    out: list = [html.H3("Pairs of columns measured (the tree)", className="h6"),
                 base.data_table((["column", "paired with"], rows),
                                 "Relations kept by the copy: only these pairs were measured")]
    if r.get("skipped"):
        out.append(base.data_table((["column left out", "why"],
                                    [[labels.get(k, k), v] for k, v in r["skipped"].items()]),
                                   "Columns not in the synthetic copy"))
    return out


def _comparison(cmp: Mapping[str, Any]) -> html.Div:
    rows = [[c["column"], c["measure"], fmt(c["synthetic"]), fmt(c["record"]),
             fmt(c["mean_original"]), fmt(c["mean_synthetic"]), fmt(c["mean_record"])]
            for c in cmp["rows"]]
    model = [[m["model"], fmt(m["accuracy"]), fmt(m["auc"])] for m in cmp["model"]]
    parts = [html.H3("Side by side: synthetic vs per-record copy at the same total ε",
                     className="h6"),
             html.P(f"Per-record copy {cmp['run_id']} (ledger release #{cmp['release_id']}): "
                    f"ε {fmt(cmp['cell_epsilon'])} per cell, Σ ε = {fmt(cmp['record_epsilon'])} "
                    "per record, local DP (not central DP). Distances to the original: "
                    "smaller is closer.", className="small"),
             base.data_table((["column", "distance", "synthetic", "per-record",
                               "mean (original)", "mean (synthetic)", "mean (per-record)"],
                              rows), "Each copy's distance to the original, per column")]
    if model:
        parts.append(base.data_table((["model", "accuracy", "ROC AUC"], model),
                                     "Model check on held-out original rows"))
    return html.Div(parts, className="studio-comparison")


def _owner(part: Mapping[str, Any]) -> list:
    out: list = [html.H3("Against the original (owner only)", className="h6")]
    if part.get("metrics"):
        labels = {n: n for n in part["metrics"]["columns"]}
        out.append(base.metrics_table(part["metrics"], labels))
        out.append(html.P("Row-by-row metrics (Privacy Match, DigiMatch, Error) do not apply: "
                          "a synthetic row is no patient's row.", className="small text-muted"))
    if part.get("model_check"):
        out.append(base.model_table(part["model_check"], "synthetic copy"))
    elif part.get("model_note"):
        out.append(base.message(part["model_note"], "secondary"))
    if part.get("comparison"):
        out.append(_comparison(part["comparison"]))
    elif part.get("comparison_note"):
        out.append(base.message(part["comparison_note"], "secondary"))
    return out


def results(r: Mapping[str, Any]) -> html.Div:
    """A finished synthetic copy: what was charged, the tree, figures of the synthetic
    table, and (owner only) the comparison with the original."""
    parts = [_summary(r), *_tree(r), *base.plots(r["summaries"])]
    if r.get("owner"):
        parts += _owner(r["owner"])
    return html.Div(parts, className="studio-synthetic-results")
