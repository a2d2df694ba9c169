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


def report_html(rep: Mapping[str, Any]) -> str:
    """A readable, self-contained HTML page of the report (every value escaped)."""
    cols = _table(["column", "technique", "ε per cell", "sensitivity", "private"],
                  [[c["label"], c["technique_label"], c["epsilon"], c["sensitivity"],
                    "yes" if c["private"] else "NO"] for c in rep["columns"]])
    met = rep["metrics"]["columns"]
    metrics = _table(["column", *[h for _, h in METRIC_COLUMNS]],
                     [[name, *[m.get(k) for k, _ in METRIC_COLUMNS]] for name, m in met.items()])
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Release report — {html.escape(str(rep['dataset']))}</title>",
        "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #999;"
        "padding:.2em .5em;text-align:right}</style></head><body>",
        f"<h1>Release report: {html.escape(str(rep['dataset']))}</h1>",
        f"<p><strong>Mechanism:</strong> {html.escape(str(rep['mechanism']))}. "
        f"<strong>Loss per record (Σ ε):</strong> {_num(rep.get('record_epsilon'))}. "
        f"<strong>Ledger release:</strong> #{_num(rep.get('ledger_release_id'))}.</p>",
        f"<p><strong>Guarantee.</strong> {html.escape(str(rep['guarantee']))}</p>",
        "<h2>Columns</h2>", cols, "<h2>Metrics</h2>", metrics,
        f"<p>Largest correlation difference: {_num(rep['metrics'].get('corr_max_diff'))}</p>",
    ]
    model = rep.get("model_check")
    if model:
        rows = [[who, *[model[key][k] for k in ("precision", "recall", "accuracy", "auc")]]
                for who, key in (("trained on original", "original"),
                                 ("trained on DP copy", "dp"))]
        parts += [f"<h2>Model check (target: {html.escape(str(model['target']))})</h2>",
                  _table(["model", "precision", "recall", "accuracy", "ROC AUC"], rows)]
    parts.append("</body></html>")
    return "".join(parts)
