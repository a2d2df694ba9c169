"""A finished per-record run (``StudioRun``) as the Release page shows and downloads it: plain
JSON, with its verdict.

``record_result`` adds to a charged run its model check, figure summaries and release report
(all post-processing: nothing is charged again) and returns them as one JSON-able dict, which
the job runner keeps in the ``RunStore`` for every worker to read. Owner only: it reads the
original.

The verdict is the run's one line: an auto-tune whose tries all missed a tolerance is a
failure (``ok`` False) and says which tolerance the shown copy missed and by how much, with
the column behind it ("Error 152 % (tolerance ≤ 20 %): Age, sd 8.2 → 21.1"); its files are
not handed out unless the owner insists, and that is recorded (``downloadable``). A passing
auto-tune says what it met; a plain run says what it cost and that nothing checked it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from dp_engine.errors import DPError
from dp_engine.release import RecordCopy, TableMetrics, Tolerances
from dp_engine.release.autotune import Check
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
                  trail: dict[str, Any] | None = None, *,
                  progress: Callable[[float, str], None] | None = None) -> dict[str, Any]:
    """What the page shows of a run (and its report, with the verdict), as JSON-able data.
    ``progress(fraction, text)`` hears each stage (figures, then the model check)."""
    tell = progress or (lambda _f, _t: None)
    tell(0.82, "Figures of each column…")
    summaries = run_summaries(original, run.copy.frame, run.schema, run.answer["metrics"],
                              include_original=True)
    if target:
        tell(0.9, "Model check…")
    model, note = run_model(original, run, target)
    rep = report(run.answer, dataset=run.dataset_title, release_id=run.served.release_id,
                 model=model)
    said = verdict(trail, run.record_epsilon)
    rep["verdict"] = said
    return {"kind": "record", "run_id": run.run_id, "dataset_id": run.dataset_id,
            "release_id": run.served.release_id, "record_epsilon": run.record_epsilon,
            "kept": list(run.copy.kept), "metrics": run.answer["metrics"],
            "summaries": summaries, "model": model, "model_note": note, "trail": trail,
            "verdict": said, "report": rep}


def _g(x: float) -> str:
    """A measured value in three significant figures, never in e-notation."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def _evidence(m: TableMetrics, check: Check) -> str:
    """What moved in the column behind ``check``: its sd, a category's share, the pair's
    correlation ("" when there is nothing to show)."""
    if check.column is None:
        return ""
    if check.name == "correlation difference":
        names = list(m.corr_names)
        a, b = check.column.split(" × ")
        i, j = names.index(a), names.index(b)
        return f"correlation {_g(m.corr_original[i, j])} → {_g(m.corr_dp[i, j])}"
    col = m.columns.get(check.column)
    if col is None:
        return ""
    if math.isfinite(col.std_original) and math.isfinite(col.std_dp):
        return f"sd {_g(col.std_original)} → {_g(col.std_dp)}"
    moved = [(abs(col.shares_dp.get(k, 0.0) - v), k, v, col.shares_dp.get(k, 0.0))
             for k, v in col.shares_original.items()]
    if moved:
        _, level, before, after = max(moved)
        return f"share of '{level}' {100 * before:.0f} % → {100 * after:.0f} %"
    return ""


def check_result(m: TableMetrics, check: Check, labels: Mapping[str, str]) -> dict[str, Any]:
    """One tolerance check as JSON-able data, with its sentence."""
    unit = f" {check.unit}" if check.unit else ""
    sign = "≥" if check.minimum else "≤"
    text = f"{check.name} {_g(check.value)}{unit} (tolerance {sign} {check.limit:g}{unit})"
    label = None if check.column is None else " × ".join(
        labels.get(c, c) for c in check.column.split(" × "))
    if label is not None and not check.met:     # what missed: the column behind it
        evidence = _evidence(m, check)
        text += f": {label}" + (f", {evidence}" if evidence else "")
    return {"name": check.name, "value": check.value, "limit": check.limit, "unit": check.unit,
            "minimum": check.minimum, "met": check.met, "column": check.column, "label": label,
            "text": text}


def trail_result(result: TuneResult, tolerances: Tolerances | None = None,
                 labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The auto-tune trail as JSON-able data: every try, its cost, each tolerance checked
    (met or missed, by how much, the column behind it), and which try was chosen."""
    tol, names = tolerances or Tolerances(), labels or {}
    tries = [{"scale": t.scale, "cost": t.cost, "failures": list(t.failures),
              "privacy_match": t.metrics.overall("privacy_match"),
              "privacy_error": t.metrics.overall("privacy_error"),
              "ks": max([c.ks for c in t.metrics.columns.values() if math.isfinite(c.ks)],
                        default=None),
              "checks": [check_result(t.metrics, c, names) for c in tol.checks(t.metrics)]}
             for t in result.tries]
    return {"tries": tries, "message": result.message, "spent": result.spent,
            "stopped": result.stopped, "chosen": result.chosen}


def verdict(trail: Mapping[str, Any] | None, record_epsilon: float | None) -> dict[str, Any]:
    """The run's one-line verdict: ``ok`` (green, files handed out) or not (red, files only
    if the owner insists), and ``text``. See the module doc."""
    cost = f"Σ ε = {_g(record_epsilon)} per record" if record_epsilon is not None else ""
    if trail is None:
        return {"ok": True, "text": f"Per-record copy made: {cost} (local DP, not central "
                                    "DP). A single run is not checked against the "
                                    "tolerances; Auto-tune checks them."}
    tries = trail.get("tries") or []
    if not tries:
        return {"ok": False, "text": "Auto-tune failed: nothing was run or charged. "
                                     f"{trail.get('message', '')}".strip()}
    chosen = trail.get("chosen")
    if chosen is not None:
        met = "; ".join(c["text"] for c in tries[chosen]["checks"]) or "no tolerance was set"
        return {"ok": True, "text": f"Auto-tune passed: try {chosen + 1} of {len(tries)} met "
                                    f"every tolerance ({met}); {cost}."}
    shown = tries[-1]
    missed = "; ".join(c["text"] for c in shown["checks"] if not c["met"]) or \
        "; ".join(shown["failures"])
    return {"ok": False, "text": f"Auto-tune failed: none of {len(tries)} tries met every "
                                 f"tolerance. The copy shown (try {len(tries)}) missed {missed}."}


def downloadable(result: Mapping[str, Any]) -> bool:
    """Whether a finished run's files may be handed out: it has a copy, and either its
    verdict passed or the owner insisted (recorded)."""
    if not result.get("run_id"):
        return False
    said = result.get("verdict") or {"ok": True}
    return bool(said.get("ok")) or bool(result.get("insisted"))
