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
import tempfile
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dp_engine.errors import DPError
from dp_engine.release import (
    ColumnChoice,
    TableMetrics,
    Tolerances,
    TuneResult,
    auto_tune,
    per_record_copy,
)
from dp_engine.release.techniques import (
    ColumnProblemsError,
    Technique,
    check_choices,
    check_data,
    record_epsilon,
    sensitivity_of,
)
from dp_engine.rng import as_generator
from dp_engine.schema import Schema
from dp_engine.sound.release import Release
from services.identity import access
from services.identity.roles import Role
from services.ledger.plan import ReleaseKey, ReleasePlan
from services.ledger.store import Ledger
from services.runner.base import Progress
from services.runner.inline import InlineRunner
from services.runner.jobs import DIED, RUNNING, Jobs
from services.session import asks_first, left_of
from services.studio import pgm
from services.studio.accounting import opendp_epsilon
from services.studio.measures import measure, metrics_dict
from services.studio.outcomes import (
    StudioRun,
    downloadable,
    record_result,
    run_model,
    trail_result,
    verdict,
)
from services.studio.report import dp_csv
from services.studio.store import RunStore
from services.studio.synthetic import SyntheticResult, SyntheticStudio
from services.studio.synthetic_outcome import comparison, same_total_choices, synthetic_result

if TYPE_CHECKING:
    from services.studio.model_check import ModelCheck

MECHANISM = "Studio per-record copy (local DP, not central DP)"
CHANNEL = "studio"
INSIST_CHANNEL = "studio-download-anyway"
"""The ledger's delivery channel of a failed run's files the owner insisted on."""

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


class AskFirst(DPError):
    """A spend to confirm before it is made: its exact price and what the caller has left."""

    def __init__(self, price: float, left: float | None) -> None:
        self.price, self.left = float(price), left
        super().__init__(
            f"This synthetic copy costs ε {self.price:.3g}, more than a quarter of what your "
            f"role has left (ε {left if left is not None else float('inf'):.3g}). Nothing is "
            f"spent yet: press 'Spend ε {self.price:.3g}' to make it, or lower ε.")


class StudioService:
    """Runs the studio's releases through the ledger (owner only for per-record copies)."""

    def __init__(self, registry, ledger: Ledger, *,
                 rng_factory: Callable[[], np.random.Generator | None] = lambda: None,
                 runs_dir: Path | None = None, jobs: Jobs | None = None) -> None:
        self.registry = registry
        self.ledger = ledger
        self._rng_factory = rng_factory
        # where every worker finds the page's jobs and runs (the app's data dir)
        self.store = RunStore(runs_dir or Path(tempfile.mkdtemp(prefix="studio-runs-")))
        self.jobs = jobs or Jobs(InlineRunner())   # where the runs run: the app's runner
        self.synthetic_iters = pgm.ITERS   # mbi's mirror-descent iterations (tests: fewer)

    def _rng(self) -> np.random.Generator:
        return as_generator(self._rng_factory())

    def _synthetic(self, iters: int | None = None) -> SyntheticStudio:
        return SyntheticStudio(self.registry, self.ledger, self._rng,
                               iters=self.synthetic_iters if iters is None else iters)

    def synthesize(self, identity, dataset_id: str, epsilon: Any, *,
                   columns: Sequence[str] | None = None) -> SyntheticResult:
        """A central-DP synthetic copy at total ε: any signed-in role, charged to its budget
        (see ``services.studio.synthetic``)."""
        return self._synthetic().synthesize(identity, dataset_id, epsilon, columns=columns)

    def synthetic_model_check(self, identity, result: SyntheticResult,
                              target: str) -> ModelCheck:
        """Model check of a synthetic copy against held-out original rows (owner only)."""
        return self._synthetic().model_check(identity, result, target)

    def problems(self, identity, dataset_id: str,
                 choices: Sequence[ColumnChoice]) -> dict[str, str]:
        """Column -> message for every choice that cannot run (nothing is charged)."""
        ds = self.registry.get(str(dataset_id), owner=access.is_owner(identity))
        return check_choices(ds.schema, choices) or check_data(ds.frame, choices)

    def run(self, identity, dataset_id: str, choices: Sequence[ColumnChoice], *,
            progress: Progress | None = None, span: tuple[float, float] = (0.05, 0.8),
            stage: str = "") -> StudioRun:
        """A per-record copy, charged through the ledger's door (owner only).

        ``progress(fraction, text)`` hears its two stages (the copy, then its metrics) as
        fractions within ``span``, each text after ``stage`` (e.g. "Auto-tune try 2: ")."""
        tell = progress or (lambda _f, _t: None)
        lo, hi = span
        _record_owner(identity)
        ds = self.registry.get(str(dataset_id))
        choices = tuple(choices)
        if problems := check_choices(ds.schema, choices) or check_data(ds.frame, choices):
            raise ColumnProblemsError(problems)
        run_id = uuid.uuid4().hex[:12]
        key = ReleaseKey(ds.id, ds.version,
                         f"studio:record:{choices_digest(choices)}:{run_id}", 0, Role.OWNER)
        plan = ReleasePlan(key, {0: None}, nestable=False, mechanism=MECHANISM, dp=False)
        held: dict[str, Any] = {}

        def compute(_eps, rng: np.random.Generator) -> Release:
            tell(lo, f"{stage}making the per-record copy…" if stage
                 else "Making the per-record copy…")
            held["copy"] = copy = per_record_copy(ds.frame, ds.schema, choices, rng=rng)
            return Release(statistic="studio per-record copy", value=[],
                           epsilon=copy.record_epsilon, mechanism=MECHANISM,
                           sensitivity={r["column"]: r["sensitivity"]
                                        for r in choices_table(ds.schema, choices)},
                           params={"kept": list(copy.kept), "rows": len(copy.frame)})

        def publish(_plan: ReleasePlan, rel: Release) -> dict[str, Any]:
            tell(lo + 0.5 * (hi - lo), f"{stage}measuring privacy and utility…"
                 if stage else "Measuring privacy and utility…")
            held["metrics"] = m = measure(ds.frame, held["copy"].frame, ds.schema, choices)
            return {"kind": "studio-record", "run_id": run_id, "dp": False,
                    "dataset_title": ds.title or ds.id,
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
                  tolerances: Tolerances, budget: float, *, factor: float = 2.0,
                  progress: Progress | None = None) -> tuple[TuneResult, list[StudioRun]]:
        """The iterative query: every try is a charged run; returns the trail and the runs."""
        if problems := self.problems(identity, dataset_id, choices):
            raise ColumnProblemsError(problems)
        runs: list[StudioRun] = []

        def one(current: list[ColumnChoice]) -> TableMetrics:
            # each try's share of the bar is its share of the auto-tune budget (a tune
            # ends when the budget cannot pay the next try)
            spent = sum(r.record_epsilon for r in runs)
            cost = record_epsilon(current)
            span = (0.05 + 0.75 * min(1.0, spent / budget),
                    0.05 + 0.75 * min(1.0, (spent + cost) / budget))
            runs.append(self.run(identity, dataset_id, current, progress=progress, span=span,
                                 stage=f"Auto-tune try {len(runs) + 1} (ε {cost:.3g} of the "
                                       f"{budget:g} budget): "))
            return runs[-1].metrics

        result = auto_tune(list(choices), one, tolerances, budget, factor=factor)
        return result, runs

    # ---- the Release page: every run is a background job kept in the RunStore ------------

    def start_record(self, identity, dataset_id: str, choices: Sequence[ColumnChoice],
                     target: str | None = None, *,
                     tune: tuple[Tolerances, float] | None = None) -> str:
        """Check a per-record run (or auto-tune, ``tune`` = (tolerances, budget)) and queue
        it; returns the job's token. Refusals and bad input raise here: nothing charged."""
        _record_owner(identity)
        if problems := self.problems(identity, dataset_id, choices):
            raise ColumnProblemsError(problems)
        return self.jobs.submit(self.store, identity.user, "record", record_job, identity,
                                dataset_id, tuple(choices), target, tune,
                                mark=self._mark(identity))

    def start_synthetic(self, identity, dataset_id: str, epsilon: Any, *,
                        columns: Sequence[str] | None = None, target: str | None = None,
                        compare: bool = False, confirmed: bool = False) -> str:
        """Check a synthetic-copy request and queue it (any signed-in role); returns the
        job's token. For the owner the job adds the metrics, the model check on ``target``
        and, with ``compare``, a per-record copy at the same total ε (charged as such).

        Spend only on purpose: unless ``confirmed``, a copy whose price would take more than
        a quarter of what a non-owner's role (or user) has left raises ``AskFirst`` with the
        price (the session's rule, ``services.session.asks_first``); nothing is queued."""
        ds, eps, _domain, plan = self._synthetic().check(identity, dataset_id, epsilon, columns)
        owner = access.is_owner(identity)
        if not confirmed and not owner:
            price = opendp_epsilon(plan)
            status = self.ledger.status(role=identity.role, dataset_id=ds.id,
                                        user=identity.user)
            if asks_first(identity.role, status, price):
                raise AskFirst(price, left_of(status))
        return self.jobs.submit(self.store, identity.user, "synthetic", synthetic_job,
                                identity, ds.id, eps, columns, target, compare,
                                self.synthetic_iters, mark=self._mark(identity))

    def _mark(self, identity) -> int:
        """The user's release count when a job starts: a job that died charged nothing if
        it is unchanged (the door stores a release and its charge together)."""
        return self.ledger.count_releases(user=identity.user)

    def _synthetic_owner_part(self, identity, r: SyntheticResult, target: str | None,
                              compare: bool, progress: Progress) -> dict[str, Any]:
        """Metrics vs the original, model check, per-record comparison (owner only)."""
        model, note = None, ""
        if target:
            if target in r.targets:
                progress(0.88, "Model check…")
                try:
                    model = self.synthetic_model_check(identity, r, target).to_dict()
                except DPError as exc:   # e.g. scikit-learn is not installed
                    note = f"The model check could not run: {exc}"
            else:
                note = f"'{target}' cannot be predicted here: choose a synthesized yes/no column."
        part: dict[str, Any] = {"metrics": metrics_dict(r.metrics) if r.metrics else None,
                                "model_check": model, "model_note": note, "comparison": None,
                                "comparison_note": ""}
        if compare:
            progress(0.92, "Per-record copy at the same total ε…")
            choices = same_total_choices(r.schema, list(r.frame.columns), r.requested_epsilon)
            try:
                run = self.run(identity, r.dataset_id, choices)
            except DPError as exc:
                part["comparison_note"] = f"No per-record copy to compare with: {exc}"
                return part
            rec_model, _ = run_model(self.registry.get(r.dataset_id).frame, run, target)
            part["comparison"] = {
                "run_id": run.run_id, "release_id": run.served.release_id,
                "record_epsilon": run.record_epsilon,
                "cell_epsilon": r.requested_epsilon / max(len(choices), 1),
                **comparison(r.schema, part["metrics"] or {"columns": {}},
                             run.answer["metrics"], {"synthetic": model, "record": rec_model})}
        return part

    def insist(self, identity, token: object) -> dict[str, Any]:
        """The owner insists on the files of a finished run whose verdict failed: recorded
        on the run (who, when) and in the ledger as a delivery of the run's release (channel
        ``studio-download-anyway``); returns the updated record. A DPError otherwise."""
        if not access.is_owner(identity):
            raise DPError("Only the data owner may download a per-record copy.")
        record = self.job(identity, token)
        result = (record or {}).get("result") or {}
        if record is None or record.get("state") != "done" or not result.get("run_id"):
            raise DPError("There is no finished copy to download; run it first.")
        if downloadable(result):
            return record
        self.ledger.log_delivery(int(result["release_id"]), user=identity.user,
                                 role=identity.role, channel=INSIST_CHANNEL)
        insisted = {"user": identity.user,
                    "at": datetime.now(UTC).isoformat(timespec="seconds")}
        result = {**result, "insisted": insisted,
                  "report": {**result.get("report", {}), "downloaded_anyway": insisted}}
        self.store.update(identity.user, str(token), result=result)
        return {**record, "result": result}

    def announced(self, identity, token: object) -> bool:
        """Whether a poll already showed ``identity``'s finished job ``token`` as done;
        marks it so (the page then draws the results on its next poll)."""
        record = self.job(identity, token)
        if record is None or record.get("announced"):
            return True
        self.store.update(identity.user, str(token), announced=True)
        return False

    def job(self, identity, token: object) -> dict[str, Any] | None:
        """The state of ``identity``'s job ``token`` (None for anyone else's or unknown)."""
        if not getattr(identity, "authenticated", False):
            return None
        record = self.store.get(identity.user, token)
        if record is not None and record.get("failure") == DIED:
            record = {**record, "text": self._died_text(identity, record)}
        return record

    def cancel(self, identity, token: object) -> bool:
        """Stop ``identity``'s running job ``token`` (whichever worker runs it); False for
        another user's token or a job that has ended."""
        if not getattr(identity, "authenticated", False):
            return False
        record = self.store.get(identity.user, token)
        if record is None or record.get("state") not in RUNNING:
            return False
        return self.jobs.cancel(self.store, identity.user, str(token))

    def _died_text(self, identity, record: dict[str, Any]) -> str:
        mark = record.get("mark")
        if isinstance(mark, int) and self.ledger.count_releases(user=identity.user) == mark:
            return ("Failed: the server process running it ended before it finished. Nothing "
                    "was charged; run it again.")
        return ("Failed: the server process running it ended before it finished. Part of it "
                "may have been charged: the ledger lists every release; run it again.")

    def job_csv(self, identity, token: object) -> str | None:
        """The DP table of ``identity``'s finished job ``token`` (escaped CSV), else None."""
        if not getattr(identity, "authenticated", False):
            return None
        return self.store.csv(identity.user, token)


def _record_owner(identity) -> None:
    if not access.is_owner(identity):
        raise DPError("Per-record copies are the data owner's only: they are not central "
                      "differential privacy. Ask for a synthetic copy instead.")


# ---- the work a job runs (on the app's runner: module-level, plain arguments) --------------

def record_job(services, progress: Progress, identity, dataset_id: str,
               choices: tuple[ColumnChoice, ...], target: str | None,
               tune: tuple[Tolerances, float] | None) -> tuple[dict[str, Any], str | None]:
    """A per-record copy (or an auto-tune trail): the page's result and the DP table."""
    studio: StudioService = services.studio
    trail = None
    if tune is None:
        run: StudioRun | None = studio.run(identity, dataset_id, choices, progress=progress)
    else:
        result, runs = studio.auto_tune(identity, dataset_id, choices, *tune,
                                        progress=progress)
        labels = {c.name: c.display for c in
                  studio.registry.get(str(dataset_id)).schema.columns}
        trail = trail_result(result, tune[0], labels)
        run = runs[result.chosen if result.chosen is not None else -1] if runs else None
    if run is None:
        return {"kind": "record", "run_id": None, "trail": trail,
                "verdict": verdict(trail, None)}, None
    frame = studio.registry.get(run.dataset_id).frame
    return (record_result(run, frame, target, trail, progress=progress),
            dp_csv(run.copy.frame))


def synthetic_job(services, progress: Progress, identity, dataset_id: str, eps: float,
                  columns: Sequence[str] | None, target: str | None, compare: bool,
                  iters: int) -> tuple[dict[str, Any], str | None]:
    """A synthetic copy (the MST fit), with the owner's metrics and comparison."""
    studio: StudioService = services.studio
    r = studio._synthetic(iters).synthesize(identity, dataset_id, eps, columns=columns,
                                            progress=progress)
    part = studio._synthetic_owner_part(identity, r, target, compare, progress) \
        if access.is_owner(identity) else None
    return synthetic_result(r, part), dp_csv(r.frame)
