"""Downloads of a studio run: the DP CSV (formula cells escaped) and the release report
(JSON and a readable HTML page). Owner only for per-record runs."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from services.csv_safe import cell


def dp_csv(frame: pd.DataFrame) -> str:
    """The DP table as CSV; text cells and headers starting with = + - @ are neutralized."""
    out = frame.copy()
    out.columns = [cell(str(c)) for c in out.columns]
    for name in out.columns:
        col = out[name]
        if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
            out[name] = col.astype(object).map(lambda v: v if pd.isna(v) else cell(str(v)))
    return out.to_csv(index=False)


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def report(answer: Mapping[str, Any], *, dataset: str, release_id: int | None,
           model: Mapping[str, Any] | None = None,
           synthetic: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The release report: techniques, ε and sensitivity per column, guarantee, metrics,
    model check (and the synthetic copy's figures when one was made)."""
    return _clean({
        "dataset": dataset, "ledger_release_id": release_id, "mechanism": answer["mechanism"],
        "central_dp": bool(answer.get("dp", False)),
        "record_epsilon": answer.get("record_epsilon"), "kept_not_private": answer.get("kept"),
        "guarantee": answer["guarantee"], "columns": answer["choices"],
        "metrics": answer["metrics"], "model_check": model, "synthetic": synthetic,
    })


def synthetic_report(summary: Mapping[str, Any], *, dataset: str) -> dict[str, Any]:
    """The release report of a synthetic copy alone: central DP, its ε, the guarantee and
    ``summary`` (the public answer; metrics, model check and comparison for the owner)."""
    return _clean({
        "dataset": dataset, "ledger_release_id": summary.get("ledger_release_id"),
        "mechanism": summary["mechanism"], "central_dp": True,
        "epsilon": summary.get("epsilon"), "guarantee": summary["guarantee"],
        "synthetic": summary,
    })


def report_json(rep: Mapping[str, Any]) -> str:
    return json.dumps(rep, indent=2, sort_keys=False)


def _num(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th scope='col'>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_num(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


METRIC_COLUMNS = [("privacy_match", "Privacy Match %"), ("digimatch", "DigiMatch %"),
                  ("privacy_error", "Privacy Error %"), ("mean_original", "mean (original)"),
                  ("mean_dp", "mean (DP)"), ("std_original", "sd (original)"),
                  ("std_dp", "sd (DP)"), ("wasserstein", "Wasserstein"), ("ks", "KS"),
                  ("total_variation", "share distance (TV)")]


def _metrics_table(met: Mapping[str, Any]) -> str:
    return _table(["column", *[h for _, h in METRIC_COLUMNS]],
                  [[name, *[m.get(k) for k, _ in METRIC_COLUMNS]] for name, m in met.items()])


def _model_html(model: Mapping[str, Any] | None, dp_label: str) -> list[str]:
    if not model:
        return []
    rows = [[who, *[model[key][k] for k in ("precision", "recall", "accuracy", "auc")]]
            for who, key in (("trained on original", "original"), (dp_label, "dp"))]
    return [f"<h3>Model check (target: {html.escape(str(model['target']))})</h3>",
            _table(["model", "precision", "recall", "accuracy", "ROC AUC"], rows)]


def _record_html(rep: Mapping[str, Any]) -> list[str]:
    cols = _table(["column", "technique", "ε per cell", "sensitivity", "private"],
                  [[c["label"], c["technique_label"], c["epsilon"], c["sensitivity"],
                    "yes" if c["private"] else "NO"] for c in rep["columns"]])
    said, anyway = rep.get("verdict") or {}, rep.get("downloaded_anyway") or {}
    head = []
    if said:
        head.append(f"<p><strong>Verdict ({'passed' if said.get('ok') else 'FAILED'}):"
                    f"</strong> {html.escape(str(said.get('text', '')))}</p>")
    if anyway:
        head.append(f"<p><strong>Downloaded anyway</strong> by "
                    f"{html.escape(str(anyway.get('user')))} at "
                    f"{html.escape(str(anyway.get('at')))}, although it failed its "
                    "tolerances.</p>")
    return [
        *head,
        f"<p><strong>Mechanism:</strong> {html.escape(str(rep['mechanism']))}. "
        f"<strong>Loss per record (Σ ε):</strong> {_num(rep.get('record_epsilon'))}. "
        f"<strong>Ledger release:</strong> #{_num(rep.get('ledger_release_id'))}.</p>",
        f"<p><strong>Guarantee.</strong> {html.escape(str(rep['guarantee']))}</p>",
        "<h2>Columns</h2>", cols, "<h2>Metrics</h2>", _metrics_table(rep["metrics"]["columns"]),
        f"<p>Largest correlation difference: {_num(rep['metrics'].get('corr_max_diff'))}</p>",
        *_model_html(rep.get("model_check"), "trained on DP copy"),
    ]


def _synthetic_html(syn: Mapping[str, Any]) -> list[str]:
    """The synthetic copy's section: ε charged, n̂, tree, skipped columns, and (owner only)
    metrics, model check and the comparison with the per-record copy."""
    parts = [
        "<h2>Synthetic copy (central DP)</h2>",
        f"<p><strong>Mechanism:</strong> {html.escape(str(syn['mechanism']))}. "
        f"<strong>ε charged:</strong> {_num(syn.get('epsilon'))} (requested "
        f"{_num(syn.get('requested_epsilon'))}; accountant: "
        f"{html.escape(str(syn.get('accountant', '')))}). "
        f"<strong>Rows (n̂, noisy):</strong> {_num(syn.get('rows'))}. "
        f"<strong>Ledger release:</strong> #{_num(syn.get('ledger_release_id'))}.</p>",
        f"<p><strong>Guarantee.</strong> {html.escape(str(syn['guarantee']))}</p>",
        "<h3>Columns synthesized and the measured tree</h3>",
        _table(["column"], [[c] for c in syn.get("columns", [])]),
        _table(["column", "paired with (tree edge)"], [list(e) for e in syn.get("edges", [])]),
        "<h3>Columns left out</h3>",
        _table(["column", "why"], [[k, v] for k, v in (syn.get("skipped") or {}).items()]),
        _table(["step", "ε"], [[k, v] for k, v in (syn.get("epsilon_by_step") or {}).items()]),
    ]
    if syn.get("metrics"):
        parts += ["<h3>Metrics against the original (owner only)</h3>",
                  _metrics_table(syn["metrics"]["columns"])]
    parts += _model_html(syn.get("model_check"), "trained on synthetic copy")
    cmp = syn.get("comparison")
    if cmp:
        parts += ["<h3>Side by side with a per-record copy at the same total ε</h3>",
                  _table(["column", "distance", "synthetic", "per-record", "mean (original)",
                          "mean (synthetic)", "mean (per-record)"],
                         [[r["column"], r["measure"], r["synthetic"], r["record"],
                           r["mean_original"], r["mean_synthetic"], r["mean_record"]]
                          for r in cmp["rows"]]),
                  _table(["model", "accuracy", "ROC AUC"],
                         [[m["model"], m["accuracy"], m["auc"]] for m in cmp["model"]])]
    return parts


def report_html(rep: Mapping[str, Any]) -> str:
    """A readable, self-contained HTML page of the report (every value escaped): the
    per-record part when there is one, the synthetic copy's when there is one."""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Release report — {html.escape(str(rep['dataset']))}</title>",
        "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #999;"
        "padding:.2em .5em;text-align:right}</style></head><body>",
        f"<h1>Release report: {html.escape(str(rep['dataset']))}</h1>",
    ]
    if rep.get("columns") is not None:
        parts += _record_html(rep)
    if rep.get("synthetic"):
        parts += _synthetic_html(rep["synthetic"])
    parts.append("</body></html>")
    return "".join(parts)
