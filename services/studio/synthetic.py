"""The central-DP synthetic copy, charged through the ledger's one door.

MST (``dp_engine.release.synthetic``) measures the table at total ε; ``mbi`` fits and samples
(post-processing). The ε charged is OpenDP's accountant's (``accounting.opendp_epsilon``) for
exactly the measurements run: a DP release (``dp=True``) paid by the requesting role's budget
and added to the dataset's loss. It is the only table any role may request. Every request is
a new draw with its own ledger row (a run id in the key), so requests add up. The stored
release keeps the noisy measurements server side; the answer holds only DP outputs and public
metadata. Metrics and the model check compare with the original: the owner's only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dp_engine.errors import DPError, InvalidEpsilonError
from dp_engine.release import TableMetrics, table_metrics
from dp_engine.release.synthetic import (
    FRACTIONS,
    Measurements,
    MSTPlan,
    SynthDomain,
    bounded_rows,
    decode,
    encode,
    measure_mst,
    plan_mst,
    synth_domain,
)
from dp_engine.schema import Schema
from dp_engine.sound.release import Release
from services.identity import access
from services.ledger.plan import ReleaseKey, ReleasePlan
from services.ledger.records import Served
from services.studio import pgm
from services.studio.accounting import opendp_epsilon
from services.studio.measures import categories_of, metrics_dict
from services.studio.model_check import ModelCheck, binary_targets
from services.studio.model_check import model_check as check_model

MECHANISM = "Studio synthetic copy (MST, central DP, add/remove-one)"
CHANNEL = "studio"
MAX_EPSILON = 50.0

GUARANTEE = (
    "Synthetic copy: central differential privacy (pure ε-DP) against adding or removing one "
    "patient, made by MST. The table's size n̂, every column's distribution and the pairs of "
    "columns of a spanning tree are measured with Laplace noise, the tree itself is chosen "
    "privately; a statistical model fitted to those noisy measurements is then sampled "
    "(Private-PGM, the mbi library), which costs nothing more. ε is split in fixed public "
    "fractions, and the ε charged is what the OpenDP library's accountant computes for the "
    "measurements run. Bounds, bins and categories come from the public schema, never from "
    "the data; numbers are drawn uniformly within their bin, so only the bins carry "
    "information. Relations not on the tree are not preserved. Each request is a new copy "
    "and is charged again."
)


@dataclass
class SyntheticResult:
    """One charged synthetic copy: the table, what was measured and charged, and (owner
    only) its metrics against the original.

    ``frame``: the synthetic rows (DP: any role may see and download them). ``metrics`` is
    None for non-owners (it compares with the original); row-by-row metrics (Privacy
    Match, DigiMatch, Error) are NaN: a synthetic row is no patient's row.
    """

    run_id: str
    dataset_id: str
    dataset_title: str
    schema: Schema
    frame: pd.DataFrame
    epsilon: float                 # charged (OpenDP's accountant)
    requested_epsilon: float
    plan: MSTPlan
    edges: tuple[tuple[str, str], ...]
    skipped: Mapping[str, str]
    served: Served
    answer: Mapping[str, Any]
    metrics: TableMetrics | None = None
    extra: dict = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return len(self.frame)

    def summary(self, model: ModelCheck | None = None) -> dict[str, Any]:
        """For the release report's ``synthetic`` part: the public answer, and the owner's
        metrics and model check when there are any."""
        return {**self.answer, "ledger_release_id": self.served.release_id,
                "metrics": metrics_dict(self.metrics) if self.metrics is not None else None,
                "model_check": model.to_dict() if model is not None else None}

    @property
    def targets(self) -> list[str]:
        """Columns the model check can predict (booleans and two-category columns)."""
        return binary_targets(self.schema, list(self.frame.columns))


def check_epsilon(epsilon: Any) -> float:
    """ε as a float in (0, MAX_EPSILON], or a DPError a clinician can act on."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise InvalidEpsilonError("Enter ε as a number, e.g. 1.") from None
    if not (0 < eps <= MAX_EPSILON):
        raise InvalidEpsilonError(f"ε must be above 0 and at most {MAX_EPSILON:g} "
                                  f"(got {epsilon!r}).")
    return eps


def _measurement_payload(m: Measurements) -> dict[str, np.ndarray]:
    """The noisy measurements by name (server side: lets the copy be redrawn for free)."""
    names = m.domain.names
    out = {"count": np.array([m.count])}
    out.update({f"1:{names[j]}": y for j, y in enumerate(m.one_way)})
    out.update({f"2:{names[a]}|{names[b]}": y
                for (a, b), y in zip(m.edges, m.two_way, strict=True)})
    return out


def synthetic_metrics(original: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema,
                      domain: SynthDomain) -> TableMetrics:
    """Distributional metrics of the synthetic columns against the original (owner only)."""
    kinds = {a.name: "numeric" if a.edges is not None else "categorical"
             for a in domain.attributes}
    cats = {a.name: categories_of(schema, a.name) for a in domain.attributes
            if a.edges is None}
    return table_metrics(original, synthetic, kinds, categories=cats, paired=False)


def make_copy(frame: pd.DataFrame, schema: Schema, domain: SynthDomain, plan: MSTPlan,
              rng: np.random.Generator, *, iters: int = pgm.ITERS,
              progress: Callable[[float], None] | None = None,
              ) -> tuple[pd.DataFrame, Measurements]:
    """MST's measurements of ``frame`` (at most k rows per patient) and the sampled table.

    Spends ``plan.epsilon``: call it only inside the ledger's door (or on public benchmark
    data)."""
    rows, _ = bounded_rows(frame, schema)
    m = measure_mst(encode(rows, schema, domain), domain, plan, rng)
    codes = pgm.synthesize_codes(m, rng, iters=iters, progress=progress)
    return decode(codes, schema, domain, rng), m


class SyntheticStudio:
    """Makes synthetic copies for any authenticated role, charged to that role."""

    def __init__(self, registry, ledger, rng: Callable[[], np.random.Generator], *,
                 iters: int = pgm.ITERS) -> None:
        self.registry = registry
        self.ledger = ledger
        self._rng = rng
        self.iters = iters

    def check(self, identity, dataset_id: str, epsilon: Any,
              columns: Sequence[str] | None = None) -> tuple[Any, float, SynthDomain, MSTPlan]:
        """(dataset, ε, domain, plan) of a request, or a DPError before anything is charged."""
        if not getattr(identity, "authenticated", False):
            raise DPError("Sign in to request a synthetic copy.")
        pgm.require()
        ds = self.registry.get(str(dataset_id), owner=access.is_owner(identity))
        eps = check_epsilon(epsilon)
        domain = synth_domain(ds.schema, columns)
        k = 1 if ds.schema.patient_column is None else ds.schema.max_rows_per_patient
        return ds, eps, domain, plan_mst(eps, len(domain.attributes), k)

    def synthesize(self, identity, dataset_id: str, epsilon: Any, *,
                   columns: Sequence[str] | None = None,
                   progress: Callable[[float, str], None] | None = None) -> SyntheticResult:
        """A synthetic copy at total ε through the ledger's door (see the module doc).

        ``progress(fraction, text)`` hears how far the copy is (the model fit is most of it)."""
        ds, eps, domain, plan = self.check(identity, dataset_id, epsilon, columns)
        owner = access.is_owner(identity)
        charged = opendp_epsilon(plan)
        tell = progress or (lambda _f, _t: None)
        run_id = uuid.uuid4().hex[:12]
        key = ReleaseKey(ds.id, ds.version, f"studio:synthetic:{run_id}", 0, identity.role)
        release_plan = ReleasePlan(key, {0: charged}, nestable=False, mechanism=MECHANISM,
                                   leaves=True)   # a table made to leave: always counted
        held: dict[str, Any] = {}

        def compute(_eps, rng: np.random.Generator) -> Release:
            tell(0.05, "Measuring the table (noisy marginals)…")
            held["frame"], m = make_copy(
                ds.frame, ds.schema, domain, plan, rng, iters=self.iters,
                progress=lambda f: tell(0.1 + 0.7 * f, "Fitting the model to the measurements…"))
            held["m"] = m
            return Release(statistic="studio synthetic copy", value=[], epsilon=charged,
                           mechanism=MECHANISM, sensitivity=float(plan.contribution),
                           params={"rows": m.rows, "columns": list(domain.names),
                                   "edges": [list(e) for e in self._edge_names(m)]},
                           noisy=_measurement_payload(m))

        def publish(_plan: ReleasePlan, _rel: Release) -> dict[str, Any]:
            return {**self._answer(run_id, eps, charged, plan, domain, held["m"]),
                    "dataset_title": ds.title or ds.id}

        served = self.ledger.release(release_plan, compute, publish, user=identity.user,
                                     channel=CHANNEL, rng=self._rng)
        if "frame" not in held:   # a stored twin: cannot happen, every request has its own key
            raise DPError("This copy was already recorded; request it again for a new one.")
        if owner:
            tell(0.85, "Comparing with the original (owner only)…")
        metrics = (synthetic_metrics(ds.frame, held["frame"], ds.schema, domain)
                   if owner else None)
        return SyntheticResult(run_id, ds.id, ds.title or ds.id, ds.schema, held["frame"],
                               served.charged, eps, plan, self._edge_names(held["m"]),
                               dict(domain.skipped), served, served.answer, metrics)

    def model_check(self, identity, result: SyntheticResult, target: str) -> ModelCheck:
        """Original-trained vs synthetic-trained model on held-out original rows (owner only)."""
        if not access.is_owner(identity):
            raise DPError("The model check reads the original data: it is the data owner's "
                          "only.")
        if target not in result.targets:
            raise DPError(f"'{target}' cannot be predicted: choose a yes/no column.")
        ds = self.registry.get(result.dataset_id)
        return check_model(ds.frame, result.frame, ds.schema, target, paired=False)

    @staticmethod
    def _edge_names(m: Measurements) -> tuple[tuple[str, str], ...]:
        names = m.domain.names
        return tuple((names[a], names[b]) for a, b in m.edges)

    def _answer(self, run_id: str, eps: float, charged: float, plan: MSTPlan,
                domain: SynthDomain, m: Measurements) -> dict[str, Any]:
        """The public answer: DP outputs (n̂, the tree) and public metadata only."""
        return {"kind": "studio-synthetic", "run_id": run_id, "dp": True,
                "mechanism": MECHANISM, "epsilon": charged, "requested_epsilon": eps,
                "epsilon_by_step": dict(plan.epsilons), "fractions": dict(FRACTIONS),
                "contribution": plan.contribution, "rows": m.rows,
                "columns": list(domain.names), "skipped": dict(domain.skipped),
                "edges": [list(e) for e in self._edge_names(m)],
                "accountant": "OpenDP (basic composition, pure DP)",
                "libraries": pgm.library_versions(), "iters": self.iters,
                "guarantee": GUARANTEE}
