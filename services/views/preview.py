"""Free previews: what a release would look like and cost, drawn from simulated data.

A preview never reads a private row. Its chart comes from a table simulated from the dataset's
public facts — bounds, categories and bins from the schema, the number of records and each
numeric column's shape from the dataset version's public calibration (DP releases) — run
through the same view plan and mechanism at the ε the release would cost, so a collaborator
sees the chart's shape and noise level, not the patients. Its price is the ledger's quote
(public metadata only) and is exact: the Release button spends exactly it.

The one step that is not a release of the view itself: a grouping nobody has grouped by yet
needs its DP group sizes first. The preview then says what pricing the grouping costs (exact,
from the role's budget: the sizes are released to it and public from then on) and the most
the view can cost afterwards (the role's per-view ceiling), never an estimate.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from dp_engine.errors import DPError
from dp_engine.schema import NUMERIC_KINDS, ColumnSpec, Schema
from dp_engine.sound.aggregates import repeated
from dp_engine.sound.pilot import GroupScales, pooled_scales
from dp_engine.sound.plan import DEFAULT_CEILINGS
from services.data.sources.memory import PandasSource
from services.data.sources.query import AggregateQuery, Aggregates
from services.ledger.records import AccountStatus, Quote
from services.views import statistics as st
from services.views.answer import ViewAnswer
from services.views.inputs import has_pilot, pilot_grid, pilot_key, size_key, with_bound
from services.views.plans import PaperPlan
from services.views.queries import ViewRequest

PREVIEW_LABEL = "preview — simulated, not your patients"
FALLBACK_SIZE = 200
"""Rows simulated when the quote has no public size (paper mode prices nothing in advance)."""
SIMULATED_ROWS = 200_000
"""Most rows a preview draws: a larger n̂ is stood for by counting each row several times
(``RepeatedSource``), so a preview of a warehouse table costs what one of 200 000 rows does
(a preview of 1e8 rows once drew 1e8, gigabytes and seconds)."""


@dataclass(frozen=True)
class Preview:
    """A simulated answer and the quote of the real release (what it would cost now).

    ``cost``: ε the release would take from the role's budget (0 when already released to the
    role: it opens free); ``refusal``: the message a release would be refused with now.
    """

    answer: ViewAnswer
    cached: bool
    cost: float
    dp: bool
    status: AccountStatus
    refusal: str | None
    priced: bool = True              # False: the grouping's sizes must be priced first
    pricing_cost: float = 0.0        # ε pricing the grouping takes from the role's budget
    bound: float | None = None       # the most the view can cost once priced (the ceiling)


def seed_for(req: ViewRequest, schema: Schema) -> int:
    """A seed from the public request: the same controls always draw the same preview."""
    text = f"{req.query_key(schema)}|{req.tier}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def simulate_column(spec: ColumnSpec, n: int, rng: np.random.Generator,
                    shape: GroupScales | None = None) -> np.ndarray:
    """``n`` values of ``spec`` from public facts only.

    Categories: uniform over the public list; bounded numbers: drawn from the column's public
    shape (``shape``: the calibration's DP pilot) when there is one, else a normal centred in
    the bounds (sd a sixth of the width), clipped to them; anything else: missing.
    """
    if spec.categories:
        cats = np.asarray(spec.categories, dtype=object)
        return cats[rng.integers(0, len(cats), size=n)]
    if spec.kind in NUMERIC_KINDS and spec.has_bounds:
        lo, hi = spec.bounds()
        if shape is not None and shape.shape[0].sum() > 0:
            cell = rng.choice(shape.shape[0].size, size=n, p=shape.shape[0])
            return rng.uniform(shape.edges[cell], shape.edges[cell + 1])
        return np.clip(rng.normal((lo + hi) / 2, (hi - lo) / 6, size=n), lo, hi)
    return np.full(n, np.nan)


def simulated_frame(schema: Schema, columns: list[str], n: int, rng: np.random.Generator,
                    shapes: dict[str, GroupScales] | None = None) -> pd.DataFrame:
    """A table of ``n`` simulated patients with ``columns`` (public facts only)."""
    shapes = shapes or {}
    return pd.DataFrame({c: simulate_column(schema.column(c), n, rng, shapes.get(c))
                         for c in columns})


class RepeatedSource(PandasSource):
    """Simulated rows that stand for ``times`` as many: every aggregate is ``times`` the
    aggregate of the rows (``dp_engine.sound.aggregates.repeated``)."""

    def __init__(self, frame: pd.DataFrame, times: int = 1) -> None:
        super().__init__(frame)
        self.times = int(times)

    def aggregate(self, query: AggregateQuery) -> Aggregates:
        return repeated(super().aggregate(query), self.times)

    def row_count(self) -> int:
        return len(self.frame) * self.times


def simulated_source(schema: Schema, columns: list[str], n: int, rng: np.random.Generator,
                     shapes: dict[str, GroupScales] | None = None) -> RepeatedSource:
    """About ``n`` simulated patients (public facts only): at most ``SIMULATED_ROWS``
    drawn, each counted ``times`` times (n within ``times``/2, under 0.001 % of n past the
    cap); one row per simulated patient."""
    times = max(1, math.ceil(n / SIMULATED_ROWS))
    frame = simulated_frame(schema, columns, max(1, round(n / times)), rng, shapes)
    if schema.patient_column:
        frame[schema.patient_column] = np.arange(len(frame))
    return RepeatedSource(frame, times)


def _n_hat(plan: Any) -> int:
    """The view's public DP size once its plan is built (paper mode: a fixed size)."""
    n = int(getattr(plan, "n_hat", 0) or 0)
    return n if n > 0 else FALLBACK_SIZE


def preview(releases, identity, req: ViewRequest, dataset, *, plan: Any = None,
            quote: Quote | None = None, internals: dict[str, Any] | None = None) -> Preview:
    """The preview of ``req`` for ``identity`` (role already clamped into ``req``).

    ``releases``: the ReleaseService (its ``plan``, ``calibrate`` and its ledger). ``plan``,
    ``quote`` (of that very plan) and ``internals`` (the calibration releases by key) are what
    the caller's session already read for the screen (``Session.look``); without them they
    are made and read here. Raises DPError
    with a plain message when the view cannot be planned (e.g. a column without bounds).
    Reads no row and draws nothing but the dataset version's reserved calibration, once.
    """
    ledger = releases.ledger
    if plan is None or quote is None:
        plan = releases.plan(identity, req, dataset=dataset)
    if quote is None:
        if not isinstance(plan, PaperPlan):
            releases.calibrate(dataset)
        quote = ledger.quote(plan, user=identity.user)
    if internals is None:
        internals = {key: rel for key in _wanted(plan, req)
                     if (rel := ledger.internal(str(dataset.version), key)) is not None}
    shapes = public_shapes(internals, dataset, [req.x])
    if quote.missing_inputs and not quote.cached:
        return _unpriced(releases, identity, req, dataset, quote, shapes, internals)
    if quote.plan is None and not quote.cached:
        raise DPError("This view cannot be priced yet. Nothing was charged; please try again.")
    # already released to the role: the quote names no plan, build it to draw with
    release_plan = quote.plan if quote.plan is not None else _build(plan, internals)
    answer = _simulated_answer(plan, release_plan, req, dataset, shapes)
    cost = 0.0 if quote.cached else float(quote.cost)
    return Preview(answer=answer, cached=quote.cached, cost=cost, dp=release_plan.dp,
                   status=quote.status, refusal=None if quote.cached else quote.refusal)


def _wanted(plan, req: ViewRequest) -> list[str]:
    """The calibration releases a preview of ``plan`` reads."""
    return [size_key(None), pilot_key(req.x), *(s.key for s in plan.inputs)]


def public_shapes(internals: dict[str, Any], dataset, columns: list[str]
                  ) -> dict[str, GroupScales]:
    """The calibration's pooled pilot of each numeric column (public), for simulating it."""
    out = {}
    for name in columns:
        spec = dataset.schema.column(name)
        pilot = internals.get(pilot_key(name))
        if has_pilot(spec) and pilot is not None:
            out[name] = pooled_scales(pilot, pilot_grid(spec), [1.0])
    return out


def _build(plan, internals: dict[str, Any]):
    """The priced plan from the stored calibration (it exists once anything is served)."""
    missing = [s.key for s in plan.inputs if s.key not in internals]
    if missing:
        raise DPError("This view cannot be priced yet. Nothing was charged; please try again.")
    return plan.build({s.key: internals[s.key] for s in plan.inputs})


def _unpriced(releases, identity, req: ViewRequest, dataset, quote: Quote,
              shapes: dict[str, GroupScales], internals: dict[str, Any]) -> Preview:
    """A grouping whose sizes nobody has priced: the chart drawn on a simulated copy (its
    sizes simulated too) at the ε the simulated plan gives, and the exact price of pricing
    the grouping with the most the view can then cost — no estimate of the view's price."""
    rng = np.random.default_rng(seed_for(req, dataset.schema))
    everyone = internals.get(size_key(None))
    size = (int(round(float(np.nansum(np.asarray(everyone.value, dtype=float)))))
            if everyone is not None else 0) or FALLBACK_SIZE
    columns = [req.x] + ([req.group] if req.group else [])
    simulated = SimpleNamespace(id=dataset.id, title=getattr(dataset, "title", ""),
                                version=f"{dataset.version}|simulated", schema=dataset.schema,
                                data=simulated_source(dataset.schema, columns, size, rng,
                                                      shapes))
    plan = releases.plan(identity, req, dataset=simulated)
    release_plan = plan.build({s.key: s.compute(s.epsilon, rng) for s in plan.inputs})
    answer = _simulated_answer(plan, release_plan, req, simulated, shapes)
    ceiling = float(DEFAULT_CEILINGS[req.tier])
    return Preview(answer=answer, cached=False, cost=float(quote.cost), dp=release_plan.dp,
                   status=quote.status, refusal=quote.refusal, priced=False,
                   pricing_cost=float(quote.cost), bound=ceiling)


def _simulated_answer(plan, release_plan, req: ViewRequest, dataset,
                      shapes: dict[str, GroupScales]) -> ViewAnswer:
    """Run the view's own mechanism on simulated rows at the release's ε (nothing stored).

    Sound views are released from aggregates: the simulated table answers the view's own
    aggregate query through an in-memory source; paper mode reads the simulated rows.
    """
    rng = np.random.default_rng(seed_for(req, dataset.schema))
    schema = dataset.schema
    view = plan.view if isinstance(plan, PaperPlan) else plan   # paper mode wraps a view
    columns = [req.x] + ([req.group] if req.group else [])
    if isinstance(plan, PaperPlan):
        frame = simulated_frame(schema, columns, _n_hat(view), rng, shapes)
        rows = st.inputs(req, frame, schema, histogram=view.figure == "histogram")
        compute = plan.compute(lambda: rows)
    else:
        source = simulated_source(schema, columns, _n_hat(view), rng, shapes)
        agg = source.aggregate(with_bound(plan.query(), schema))
        compute = plan.compute(lambda: agg)
    tier = release_plan.key.tier
    rel = compute(release_plan.epsilons.get(tier), rng)
    published = plan.publish(release_plan, rel, None)
    return ViewAnswer.from_dict({**published, "realized_noise_percent": None,
                                 "flags": [PREVIEW_LABEL, *published.get("flags", [])]})
