"""A finished per-record run (``StudioRun``) as the Release page shows and downloads it: plain
JSON.

``record_result`` adds to a charged run its model check, figure summaries and release report
(all post-processing: nothing is charged again) and returns them as one JSON-able dict, which
the job runner keeps in the ``RunStore`` for every worker to read. Owner only: it reads the
original.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from dp_engine.errors import DPError
from dp_engine.release import RecordCopy, TableMetrics
from dp_engine.schema import Schema
from services.ledger.records import Served
from services.studio.model_check import binary_targets, model_check
from services.studio.report import report
from services.studio.summaries import run_summaries

if TYPE_CHECKING:
    from dp_engine.release import TuneResult


@dataclass
class StudioRun:
    """One charged per-record run: the copy, its metrics, what the ledger recorded."""

    run_id: str
    dataset_id: str
    dataset_title: str
    schema: Schema
    copy: RecordCopy
    metrics: TableMetrics
    served: Served
    answer: Mapping[str, Any]
    extra: dict = field(default_factory=dict)

    @property
    def record_epsilon(self) -> float:
        return self.copy.record_epsilon


def run_model(original: pd.DataFrame, run: StudioRun,
              target: str | None) -> tuple[dict[str, Any] | None, str]:
    """The paired model check of ``run`` on ``target`` (or None and why not)."""
    if not target:
        return None, ""
    if target not in binary_targets(run.schema, list(run.copy.frame.columns)):
        return None, ("The model check needs a released yes/no column as its target; "
                      f"'{target}' is not one in this run.")
    try:
        return model_check(original, run.copy.frame, run.schema, target,
                           paired=True).to_dict(), ""
    except (DPError, ValueError) as exc:
        return None, f"The model check could not run: {exc}"


def record_result(run: StudioRun, original: pd.DataFrame, target: str | None,
                  trail: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the page shows of a run (and its report), as JSON-able data."""
    model, note = run_model(original, run, target)
    summaries = run_summaries(original, run.copy.frame, run.schema, run.answer["metrics"],
                              include_original=True)
    rep = report(run.answer, dataset=run.dataset_title, release_id=run.served.release_id,
                 model=model)
    return {"kind": "record", "run_id": run.run_id, "dataset_id": run.dataset_id,
            "release_id": run.served.release_id, "record_epsilon": run.record_epsilon,
            "kept": list(run.copy.kept), "metrics": run.answer["metrics"],
            "summaries": summaries, "model": model, "model_note": note, "trail": trail,
            "report": rep}


def trail_result(result: TuneResult) -> dict[str, Any]:
    """The auto-tune trail as JSON-able data: every try, its cost and what it missed."""
    tries = [{"scale": t.scale, "cost": t.cost, "failures": list(t.failures),
              "privacy_match": t.metrics.overall("privacy_match"),
              "privacy_error": t.metrics.overall("privacy_error"),
              "ks": max([c.ks for c in t.metrics.columns.values() if math.isfinite(c.ks)],
                        default=None)} for t in result.tries]
    return {"tries": tries, "message": result.message, "spent": result.spent}
