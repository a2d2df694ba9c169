"""A finished synthetic copy as the Release page shows and downloads it: plain JSON.

Every role gets the public part: n̂, the ε charged (the ledger row), the tree's edges, the
skipped columns and why, and summaries of the SYNTHETIC table only. The owner additionally
gets the metrics against the original, the model check and the side-by-side comparison with
a per-record copy at the same total ε (``owner_part``); nothing of it is built for anyone else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dp_engine.release import ColumnChoice, default_technique
from dp_engine.release.synthetic import synth_domain
from dp_engine.schema import Schema
from services.studio.report import synthetic_report
from services.studio.summaries import synthetic_summaries

if TYPE_CHECKING:
    from services.studio.synthetic import SyntheticResult

MODEL_SIDES = (("trained on original", "original"), ("trained on synthetic copy", "synthetic"),
               ("trained on per-record copy", "record"))


def same_total_choices(schema: Schema, columns: Sequence[str],
                       total: float) -> list[ColumnChoice]:
    """Default per-record techniques whose per-cell ε add up to ``total`` per record."""
    per = total / max(len(columns), 1)
    return [ColumnChoice(c, default_technique(schema.column(c)), per) for c in columns]


def _distance(m: Mapping[str, Any]) -> tuple[str, float | None]:
    key, name = (("ks", "KS") if m.get("kind") == "numeric"
                 else ("total_variation", "share distance"))
    v = m.get(key)
    return name, (float(v) if v is not None and math.isfinite(float(v)) else None)


def comparison(schema: Schema, synthetic: Mapping[str, Any], record: Mapping[str, Any],
               models: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any]:
    """Side by side, per column: the distance to the original (KS or share distance) and
    the mean, for the synthetic and the per-record copy; and the model check of each."""
    rows = []
    for name, ms in synthetic["columns"].items():
        mr = record["columns"].get(name, {})
        measure, syn = _distance(ms)
        rows.append({"column": schema.column(name).display, "measure": measure,
                     "synthetic": syn, "record": _distance(mr)[1] if mr else None,
                     "mean_original": ms.get("mean_original"),
                     "mean_synthetic": ms.get("mean_dp"), "mean_record": mr.get("mean_dp")})
    model_rows = []
    for label, key in MODEL_SIDES:
        src = models.get("synthetic" if key == "original" else key) or {}
        scores = src.get("original" if key == "original" else "dp")
        if scores:
            model_rows.append({"model": label, "accuracy": scores["accuracy"],
                               "auc": scores["auc"]})
    return {"rows": rows, "model": model_rows}


def synthetic_result(r: SyntheticResult, owner_part: dict[str, Any] | None) -> dict[str, Any]:
    """What the page shows of a synthetic copy (and its report), as JSON-able data."""
    domain = synth_domain(r.schema, list(r.frame.columns))
    public = {"kind": "synthetic", "run_id": r.run_id, "dataset_id": r.dataset_id,
              "release_id": r.served.release_id, "epsilon": r.epsilon,
              "requested_epsilon": r.requested_epsilon, "rows": r.rows,
              "edges": [list(e) for e in r.edges], "skipped": dict(r.skipped),
              "labels": {c.name: c.display for c in r.schema.columns},
              "guarantee": r.answer["guarantee"],
              "summaries": synthetic_summaries(r.frame, r.schema, domain)}
    summary = {**r.answer, "ledger_release_id": r.served.release_id,
               **{k: (owner_part or {}).get(k) for k in ("metrics", "model_check",
                                                        "comparison")}}
    return {**public, "owner": owner_part,
            "report": synthetic_report(summary, dataset=r.dataset_title)}
