"""Studio runs through the ledger's one door.

A per-record copy is local DP against *replacing* a patient, not central DP (the row count is
exact, and one patient's cells are all released). It is therefore the owner's only and is
recorded like paper mode: a ``ReleasePlan`` with ``dp=False`` whose release states the
record's loss (Σ per-cell ε over the released columns) as a lower bound, outside every
sound-mode total. Every run is a new draw with its own ledger row (a run id in the key), so
the trail of runs is in the ledger. Bad input is refused before the door: nothing charged.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dp_engine.errors import DPError
from dp_engine.release import (
    ColumnChoice,
    RecordCopy,
    TableMetrics,
    Tolerances,
    TuneResult,
    auto_tune,
    per_record_copy,
    table_metrics,
)
from dp_engine.release.techniques import (
    ColumnProblemsError,
    Technique,
    check_choices,
    check_data,
    sensitivity_of,
)
from dp_engine.rng import as_generator
from dp_engine.schema import NUMERIC_KINDS, ColumnKind, Schema
from dp_engine.sound.release import Release
from services.identity import access
from services.identity.roles import Role
from services.ledger.plan import ReleaseKey, ReleasePlan
from services.ledger.records import Served
from services.ledger.store import Ledger
from services.studio import pgm
from services.studio.outcomes import Outcome, RecentOutcomes, outcome

if TYPE_CHECKING:
    from services.studio.model_check import ModelCheck
    from services.studio.synthetic import SyntheticResult

MECHANISM = "Studio per-record copy (local DP, not central DP)"
CHANNEL = "studio"

GUARANTEE = (
    "Per-record copy: each cell is perturbed on its own (local differential privacy). With "
    "sensitivity = the column's public range a cell is ε-DP against any change of that cell; "
    "with sensitivity 1 it only protects changes of at most one unit. A patient's loss is the "
    "sum of the ε of their columns, and runs add up. The row count is exact, so this protects "
    "against replacing a patient, not against adding or removing one: it is NOT central "
    "differential privacy, and it is recorded in the ledger like paper mode (a lower bound, "
    "outside the role budgets). Bounded Laplace uses the corrected scale (ε-DP); masked text "
    "keeps no length; columns kept as is are not private at all."
)


def metric_kind(schema: Schema, choice: ColumnChoice) -> str:
    """How a released column is measured: "numeric", "categorical" or "text"."""
    t = choice.technique
    if t.numeric:
        return "numeric"
    if t.categorical:
        return "categorical"
    if t is Technique.KEEP:
        spec = schema.column(choice.name)
        if spec.kind is ColumnKind.BOOLEAN or spec.kind is ColumnKind.CATEGORICAL:
            return "categorical"
        if spec.kind in NUMERIC_KINDS and spec.has_bounds:
            return "numeric"
    return "text"


def categories_of(schema: Schema, name: str) -> tuple:
    spec = schema.column(name)
    if spec.kind is ColumnKind.BOOLEAN and not spec.categories:
        return (False, True)
    return tuple(spec.categories or ())


def measure(original: pd.DataFrame, copy: pd.DataFrame, schema: Schema,
            choices: Sequence[ColumnChoice]) -> TableMetrics:
    """Every metric of the released columns (owner only: reads the original)."""
    released = [c for c in choices if c.name in copy.columns]
    kinds = {c.name: metric_kind(schema, c) for c in released}
    cats = {c.name: categories_of(schema, c.name) for c in released}
    return table_metrics(original, copy, kinds, categories=cats)


def choices_digest(choices: Sequence[ColumnChoice]) -> str:
    text = json.dumps([[c.name, c.technique.value, c.epsilon, c.sensitivity.value]
                       for c in choices], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def choices_table(schema: Schema, choices: Sequence[ColumnChoice]) -> list[dict[str, Any]]:
    """Per column: technique, per-cell ε, sensitivity in value units (public metadata)."""
    rows = []
    for c in choices:
        spec = schema.column(c.name)
        sens = sensitivity_of(spec, c) if c.technique.numeric else None
        rows.append({"column": c.name, "label": spec.display, "technique": c.technique.value,
                     "technique_label": c.technique.label,
                     "epsilon": c.cell_epsilon if c.technique is not Technique.KEEP else None,
                     "sensitivity": sens,
                     "sensitivity_mode": c.sensitivity.value if c.technique.numeric else None,
                     "private": c.technique is not Technique.KEEP})
    return rows


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


class StudioService:
    """Runs the studio's releases through the ledger (owner only for per-record copies)."""

    def __init__(self, registry, ledger: Ledger, *,
                 rng_factory: Callable[[], np.random.Generator | None] = lambda: None) -> None:
        self.registry = registry
        self.ledger = ledger
        self._rng_factory = rng_factory
        self.recent = RecentOutcomes()
        self.synthetic_iters = pgm.ITERS   # mbi's mirror-descent iterations (tests: fewer)

    def _rng(self) -> np.random.Generator:
        return as_generator(self._rng_factory())

    def synthesize(self, identity, dataset_id: str, epsilon: Any, *,
                   columns: Sequence[str] | None = None) -> SyntheticResult:
        """A central-DP synthetic copy at total ε: any signed-in role, charged to its budget
        (see ``services.studio.synthetic``)."""
        from services.studio.synthetic import SyntheticStudio

        studio = SyntheticStudio(self.registry, self.ledger, self._rng,
                                 iters=self.synthetic_iters)
        return studio.synthesize(identity, dataset_id, epsilon, columns=columns)

    def synthetic_model_check(self, identity, result: SyntheticResult,
                              target: str) -> ModelCheck:
        """Model check of a synthetic copy against held-out original rows (owner only)."""
        from services.studio.synthetic import SyntheticStudio

        return SyntheticStudio(self.registry, self.ledger, self._rng).model_check(
            identity, result, target)

    def problems(self, identity, dataset_id: str,
                 choices: Sequence[ColumnChoice]) -> dict[str, str]:
        """Column -> message for every choice that cannot run (nothing is charged)."""
        ds = self.registry.get(str(dataset_id), owner=access.is_owner(identity))
        return check_choices(ds.schema, choices) or check_data(ds.frame, choices)

    def run(self, identity, dataset_id: str, choices: Sequence[ColumnChoice]) -> StudioRun:
        """A per-record copy, charged through the ledger's door (owner only)."""
        if not access.is_owner(identity):
            raise DPError("Per-record copies are the data owner's only: they are not central "
                          "differential privacy. Ask for a synthetic copy instead.")
        ds = self.registry.get(str(dataset_id))
        choices = tuple(choices)
        problems = check_choices(ds.schema, choices) or check_data(ds.frame, choices)
        if problems:
            raise ColumnProblemsError(problems)
        run_id = uuid.uuid4().hex[:12]
        key = ReleaseKey(ds.id, ds.version,
                         f"studio:record:{choices_digest(choices)}:{run_id}", 0, Role.OWNER)
        plan = ReleasePlan(key, {0: None}, nestable=False, mechanism=MECHANISM, dp=False)
        held: dict[str, Any] = {}

        def compute(_eps, rng: np.random.Generator) -> Release:
            copy = per_record_copy(ds.frame, ds.schema, choices, rng=rng)
            held["copy"] = copy
            return Release(statistic="studio per-record copy", value=[],
                           epsilon=copy.record_epsilon, mechanism=MECHANISM,
                           sensitivity={r["column"]: r["sensitivity"]
                                        for r in choices_table(ds.schema, choices)},
                           params={"kept": list(copy.kept), "rows": len(copy.frame)})

        def publish(_plan: ReleasePlan, rel: Release) -> dict[str, Any]:
            held["metrics"] = m = measure(ds.frame, held["copy"].frame, ds.schema, choices)
            return {"kind": "studio-record", "run_id": run_id, "dp": False,
                    "mechanism": MECHANISM, "record_epsilon": float(rel.epsilon),
                    "kept": list(held["copy"].kept), "choices": choices_table(ds.schema,
                                                                               choices),
                    "guarantee": GUARANTEE, "metrics": metrics_dict(m)}

        served = self.ledger.release(plan, compute, publish, user=identity.user,
                                     channel=CHANNEL, rng=self._rng)
        if "copy" not in held:   # a stored twin (cannot happen: every run has its own key)
            raise DPError("This run was already recorded; run it again for a new copy.")
        return StudioRun(run_id, ds.id, ds.title or ds.id, ds.schema, held["copy"],
                         held["metrics"], served, served.answer)

    def auto_tune(self, identity, dataset_id: str, choices: Sequence[ColumnChoice],
                  tolerances: Tolerances, budget: float, *,
                  factor: float = 2.0) -> tuple[TuneResult, list[StudioRun]]:
        """The iterative query: every try is a charged run; returns the trail and the runs."""
        problems = self.problems(identity, dataset_id, choices)
        if problems:
            raise ColumnProblemsError(problems)
        runs: list[StudioRun] = []

        def one(current: list[ColumnChoice]) -> TableMetrics:
            runs.append(self.run(identity, dataset_id, current))
            return runs[-1].metrics

        result = auto_tune(list(choices), one, tolerances, budget, factor=factor)
        return result, runs

    def run_page(self, identity, dataset_id: str, choices: Sequence[ColumnChoice],
                 target: str | None = None) -> Outcome:
        """A charged run with its model check, figure summaries and report, kept for the
        downloads (the Release page's Run)."""
        run = self.run(identity, dataset_id, choices)
        return self._keep(identity, outcome(run, self.registry.get(run.dataset_id).frame,
                                            target))

    def tune_page(self, identity, dataset_id: str, choices: Sequence[ColumnChoice],
                  tolerances: Tolerances, budget: float,
                  target: str | None = None) -> tuple[TuneResult, Outcome | None]:
        """Auto-tune, then the outcome of the try that met the tolerances (else the last)."""
        result, runs = self.auto_tune(identity, dataset_id, choices, tolerances, budget)
        if not runs:
            return result, None
        run = runs[result.chosen if result.chosen is not None else -1]
        return result, self._keep(identity, outcome(
            run, self.registry.get(run.dataset_id).frame, target))

    def recent_outcome(self, identity, run_id: object) -> Outcome | None:
        """This owner's recent run ``run_id`` (None for anyone else or an unknown id)."""
        if not access.is_owner(identity):
            return None
        return self.recent.get(identity.user, run_id)

    def _keep(self, identity, item: Outcome) -> Outcome:
        self.recent.put(identity.user, item)
        return item


def metrics_dict(m: TableMetrics) -> dict[str, Any]:
    """Metrics as JSON-able data (owner only: they compare with the original)."""
    return {"columns": {k: v.to_dict() for k, v in m.columns.items()},
            "overall": {name: m.overall(name) for name in
                        ("privacy_match", "digimatch", "privacy_error")},
            "corr_names": list(m.corr_names), "corr_original": m.corr_original.tolist(),
            "corr_dp": m.corr_dp.tolist(), "corr_max_diff": m.corr_max_diff,
            "corr_mean_diff": m.corr_mean_diff}
