"""Explore answers: a view plan, the ledger's one door, then the public answer.

For a request shown at tier t (the noise factor of the role it is shown at), ``answer``
builds the view's plan from public metadata, binds the data seam (the data source's
aggregates — computed where the data lives — are read only if the ledger has to draw
something; paper mode reads a capped row sample) and hands both to ``Ledger.release``, which
serves the paying role's stored answer or prices, checks, computes and records a new one (see
services/ledger/door.py). Tiers nest: the collaborator's answer is the owner-tier answer plus
independent noise (docs/accounting.md). Raw noisy sums stay in the ledger's tier store; only the
post-processed public answer ever reaches a callback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np

from dp_engine.rng import as_generator
from services.data.sources.query import Aggregates
from services.data.sources.resolve import aggregates, read_rows
from services.identity.roles import Role
from services.ledger.door import Ask
from services.ledger.records import Served, StoredRelease
from services.ledger.store import Ledger
from services.views import statistics as st
from services.views.answer import ViewAnswer
from services.views.inputs import calibration_specs, size_key, with_bound
from services.views.plans import PLANS, HistogramPlan, PaperPlan, ViewPlan, plan_for
from services.views.queries import ViewRequest

__all__ = ["ReleaseService", "ViewAnswer", "new_rng_factory"]
log = logging.getLogger(__name__)


class ReleaseService:
    """Answers Explore requests through the ledger's door with the views' plans."""

    def __init__(self, registry, ledger: Ledger, *,
                 rng_factory: Callable[[], np.random.Generator | None] = lambda: None) -> None:
        self.registry = registry
        self.ledger = ledger
        self._rng_factory = rng_factory
        self._calibrated: set[str] = set()

    def _rng(self) -> np.random.Generator:
        return as_generator(self._rng_factory())

    # ---- public -------------------------------------------------------------------
    def plan(self, identity, req: ViewRequest, *, dataset=None) -> ViewPlan | PaperPlan:
        """The plan of ``req`` paid by ``identity``'s role (public metadata only, no rows)."""
        ds = dataset if dataset is not None else self.registry.get(req.dataset_id)
        return plan_for(ds, req, identity.role, plan_store=self.ledger)

    def answer(self, identity, req: ViewRequest, *, dataset=None,
               price: bool = False) -> ViewAnswer:
        """The answer to ``req`` for ``identity`` (``answer_all`` of one request)."""
        ds = dataset if dataset is not None else self.registry.get(req.dataset_id)
        return self.answer_all(identity, [req], dataset=ds, channel="explore",
                               price=price)[0][0]

    def ask(self, identity, plan: ViewPlan | PaperPlan, ds, channel: str = "explore") -> Ask:
        """The door's request for ``plan``: its data seam and its publisher."""
        owner = identity.role is Role.OWNER
        if isinstance(plan, PaperPlan):
            rows = _row_reader(plan.view.req, ds, histogram=isinstance(plan.view, HistogramPlan))
            compute, truth = plan.compute(rows), None
        else:
            read = _aggregate_reader(plan, ds)
            compute = plan.compute(read)
            truth = (lambda: plan.truth(read())) if owner else None
        return Ask(plan, compute, lambda p, rel: plan.publish(p, rel, truth), channel)

    def answer_all(self, identity, reqs: list[ViewRequest], *, dataset, channel: str,
                   price: bool = False) -> list[tuple[ViewAnswer, int, StoredRelease | None]]:
        """Several answers for ``identity``, all or nothing through one door call (e.g. the
        figures of a published page), each with its release id and stored row; ``price``:
        release missing grouping sizes too, charged to the same role."""
        self.calibrate(dataset)
        plans = [self.plan(identity, r, dataset=dataset) for r in reqs]
        served = self.ledger.release_all([self.ask(identity, p, dataset, channel)
                                          for p in plans], user=identity.user, rng=self._rng,
                                         price=price)
        owner = identity.role is Role.OWNER
        return [(self._with_status(s, owner), s.release_id, s.stored) for s in served]

    def prepare(self, identity, req: ViewRequest, *, dataset=None) -> float:
        """Price ``req``'s grouping: release its DP group sizes (charged to the role, served
        to it, public from then on) if nobody has. Returns the ε charged (0: already
        public)."""
        ds = dataset if dataset is not None else self.registry.get(req.dataset_id)
        self.calibrate(ds)
        specs = [s for s in self.plan(identity, req, dataset=ds).inputs if s.priced]
        served = self.ledger.price(specs, dataset_id=str(ds.id),
                                   dataset_version=str(ds.version), payer=identity.role,
                                   user=identity.user, rng=self._rng)
        return sum(s.charged for s in served)

    def calibrate(self, dataset) -> float:
        """Make sure the dataset version's reserved calibration exists (drawn once, charged to
        no role); returns the ε it added (0 when it was complete)."""
        version = str(dataset.version)
        if version in self._calibrated:
            return 0.0
        added = self.ledger.calibrate(calibration_specs(dataset), dataset_id=str(dataset.id),
                                      dataset_version=version, rng=self._rng)
        self._calibrated.add(version)
        return added

    def public_size(self, dataset) -> int | None:
        """The dataset version's DP size n̂ if it was released (public), else None."""
        rel = self.ledger.internal(dataset.version, size_key(None))
        if rel is None:
            return None
        return int(round(float(np.nansum(np.asarray(rel.value, dtype=float)))))

    # ---- internals ----------------------------------------------------------------
    @staticmethod
    def _with_status(served: Served, owner: bool) -> ViewAnswer:
        s = served.status
        ans = replace(
            _answer(served.answer), cached=served.cached, epsilon_charged=served.charged,
            budget_limit=s.role.limit, budget_spent=s.role.spent,
            budget_remaining=s.role.remaining, user_limit=s.user.limit, user_spent=s.user.spent,
            dataset_loss=s.dataset.loss, dataset_cap=s.dataset.cap)
        if not owner:
            ans = ans.without_truth()   # defence in depth
        return ans


def _aggregate_reader(plan: ViewPlan, ds) -> Callable[[], Aggregates]:
    """The data seam: the view's aggregate, computed where the data lives, once and lazily."""
    return cache(lambda: aggregates(ds, with_bound(plan.query(), ds.schema)))


def _row_reader(req: ViewRequest, ds, *, histogram: bool) -> Callable[[], st.Inputs]:
    """Paper mode's rows: at most ROW_CAP of them (a seeded sample past that, stated)."""
    def read() -> st.Inputs:
        cols = [req.x] + ([req.group] if req.group else [])
        sample = read_rows(ds, cols)
        return st.inputs(req, sample.frame, ds.schema, histogram=histogram, note=sample.note)

    return cache(read)


def _answer(stored: dict[str, Any]) -> ViewAnswer:
    """A stored answer as a ViewAnswer; answers stored before schema 3 lack the figure kind."""
    if "figure" not in stored:
        legacy = PLANS.get(stored.get("view", ""))
        stored = {**stored, "dp": stored.get("mechanism") != "paper"}
        if legacy is not None:
            stored.update(figure=legacy.figure, statistic_label=legacy.statistic_label,
                          error_unit="patients" if legacy is HistogramPlan
                          else stored.get("unit", ""))
    return ViewAnswer.from_dict(stored)


def new_rng_factory(seed: int | None) -> Callable[[], np.random.Generator]:
    """Reproducible generators for tests (seeded) or OS-seeded ones (production)."""
    if seed is None:
        return lambda: as_generator(None)
    seq = np.random.SeedSequence(seed)
    return lambda: np.random.default_rng(seq.spawn(1)[0])
