"""The Explore views as release plans: one small class per view, and one for paper mode.

A view plan holds public metadata only (the dataset's id, version and schema; the request; the
paying role). From the dataset version's DP group sizes and DP pilot (internal releases the
ledger keeps, ``services/views/inputs.py``) it plans every group's ε for each tier
(``dp_engine.sound.plan_tiers``: each group's expected error in the role's band under the
role's ceiling, or the group is withheld) and returns a priced ``ReleasePlan`` whose tiers
carry one ε per group: the view costs the largest. The data is reached only through the data
source's aggregates (``AggregateQuery``: cell counts, lattice sums, candidate counts, computed
where the data lives); the engine's aggregate release functions add the noise, and the
owner's true values come from the same aggregates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from dp_engine import paper, sound
from dp_engine.bands import band
from dp_engine.schema import NUMERIC_KINDS, ColumnSpec
from dp_engine.sound.plan import WITHHELD_REASON
from dp_engine.sound.release import Release
from dp_engine.sound.releases import FINE_CANDIDATES
from dp_engine.sound.statistic import Statistic
from services.data.sources.query import AggregateQuery, Aggregates
from services.identity.roles import Role
from services.ledger.plan import (
    TIERS,
    Compute,
    Epsilon,
    InternalSpec,
    ReleaseKey,
    ReleasePlan,
)
from services.views import per_group
from services.views import statistics as st
from services.views.answer import ViewAnswer
from services.views.inputs import (
    planned_tiers,
    view_inputs,
    view_scales,
)
from services.views.queries import BOX_QS, VIEWS, RequestError, ViewRequest

Truth = Callable[[], np.ndarray]
LEFT_OUT = "left out at your request (the view costs less without it)"


class PaperOut(NamedTuple):
    """One paper-mode statistic: the grid and PyDPLib's labels for it."""

    values: np.ndarray
    epsilon: float               # the labelled ε (searched on the data)
    sensitivity: float
    noise_percent: float
    effective_epsilon: float     # a lower bound of the release's privacy loss
    found: bool


def group_epsilons(value: Epsilon | None) -> np.ndarray:
    """ε per group as the engine takes it: NaN where the group is withheld (ε 0)."""
    eps = np.atleast_1d(np.asarray(value, dtype=float))
    return np.where(eps > 0, eps, np.nan)


class ViewPlan:
    """One Explore view for one request: public metadata in, a priced ReleasePlan out."""

    view: ClassVar[str]
    statistic: ClassVar[Statistic]    # the planning statistic (dp_engine.sound.plan)
    figure: ClassVar[str]             # the figure kind (layouts/figures.py)
    mechanism: ClassVar[str]
    nestable: ClassVar[bool] = True
    statistic_label: ClassVar[str] = ""
    paper_query: ClassVar[int]        # PyDPLib's query code for paper mode

    def __init__(self, dataset: Any, req: ViewRequest, payer: Role, *,
                 plan_store: Any = None) -> None:
        """``dataset``: anything with ``id``, ``title``, ``version`` and a public ``schema``;
        ``plan_store``: where plans are shared between workers (the ledger), if anywhere."""
        schema = dataset.schema
        self.dataset, self.req, self.payer = dataset, req, Role(payer)
        self.plan_store = plan_store
        self.x_spec: ColumnSpec = schema.column(req.x)
        self.g_spec: ColumnSpec | None = schema.column(req.group) if req.group else None
        self.check_column(self.x_spec)
        self.group_keys = st.group_keys(self.g_spec)
        self.cells = self.cell_labels()
        self.contribution = schema.contribution_bound
        self.privacy_unit = schema.privacy_unit
        self.key = ReleaseKey(str(dataset.id), str(dataset.version), req.query_key(schema),
                              req.tier, self.payer)
        self.inputs: tuple[InternalSpec, ...] = view_inputs(dataset, req.x, req.group)
        self.scales: sound.GroupScales | None = None
        self.tiers: sound.TierPlan | None = None
        self.tier_eps: dict[int, np.ndarray] = {}

    # -- public metadata ---------------------------------------------------------------------
    def reasons(self) -> list[str]:
        """Why each group is withheld at the served tier ("" when shown)."""
        assert self.tiers is not None
        plan = self.tiers.tiers[self.key.tier]
        return [LEFT_OUT if key in self.req.without else
                (plan.reasons[g] or WITHHELD_REASON) if not np.isfinite(plan.epsilon[g])
                else "" for g, key in enumerate(self.group_keys)]

    def check_column(self, spec: ColumnSpec) -> None:
        """Refuse a measured column this view cannot use (default: numeric with bounds)."""
        if spec.kind not in NUMERIC_KINDS:
            raise RequestError(
                f"A {VIEWS[self.view].lower()} needs a numeric column; '{spec.label}' is "
                f"{spec.kind.value}. Choose e.g. Age, or use the histogram view."
            )
        spec.bounds()

    def cell_labels(self) -> list[str]:
        return [self.view]

    def query(self) -> AggregateQuery:
        """The aggregate this view is released from (public schema facts only)."""
        raise NotImplementedError

    def plan_kwargs(self) -> dict[str, Any]:
        return {}

    @property
    def n_hat(self) -> int:
        """The public (DP) number of records the view covers, once built."""
        return 0 if self.scales is None else int(round(float(self.scales.n_hat.sum())))

    def build(self, inputs: Mapping[str, Release]) -> ReleasePlan:
        """ε per group and tier from the public scales (nested: ε⁰_g ≥ ε¹_g ≥ ε²_g)."""
        self.scales = view_scales(inputs, self.x_spec, self.req.group)
        cache_key = (self.key.dataset_version, self.key.query_key, self.contribution)
        self.tiers = planned_tiers(cache_key, self.statistic, self.scales,
                                   store=self.plan_store, contribution=self.contribution,
                                   **self.plan_kwargs())
        left = np.isin(np.asarray(self.group_keys, dtype=object), list(self.req.without))
        self.tier_eps = {t: np.where(left, np.nan, p.epsilon)
                         for t, p in self.tiers.tiers.items()}
        eps = {t: tuple(float(v) if math.isfinite(v) else 0.0 for v in self.tier_eps[t])
               for t in TIERS}
        return ReleasePlan(self.key, eps, self.nestable, self.mechanism,
                           info={"n_hat": self.n_hat})

    # -- the data seam -----------------------------------------------------------------------
    def compute(self, data: Callable[[], Aggregates]) -> Compute:
        """The engine call on the aggregates ``data`` reads (only when the ledger draws)."""
        return lambda eps, rng: self.release(data(), group_epsilons(eps), rng)

    def release(self, agg: Aggregates, eps: np.ndarray, rng: np.random.Generator) -> Release:
        raise NotImplementedError

    def truth(self, agg: Aggregates) -> np.ndarray:
        """The un-noised statistic from the same aggregates, (groups, cells). Owner only."""
        raise NotImplementedError

    # -- the public answer -------------------------------------------------------------------
    def publish(self, plan: ReleasePlan, rel: Release, truth: Truth | None) -> dict[str, Any]:
        """The answer given to the paying role; realized noise only when ``truth`` (owner)."""
        assert self.tiers is not None
        return per_group.publish(self, plan, rel, truth).to_dict()

    def answer(self, *, values: np.ndarray, ci_low: np.ndarray, ci_high: np.ndarray,
               flags: tuple[str, ...] = (), **fields: Any) -> ViewAnswer:
        """A ViewAnswer with this view's labels and the derived-metadata warnings."""
        notes = list(flags)
        for spec in (self.x_spec, self.g_spec):
            if spec is not None and spec.derived_from_data:
                notes.append(f"Metadata of '{spec.label}' was derived from the data — "
                             "not private until the owner confirms it.")
        req, ds = self.req, self.dataset
        return ViewAnswer(
            dataset_id=ds.id, dataset_title=ds.title, view=req.view, x=req.x,
            x_label=self.x_spec.display, unit=self.x_spec.unit, group=req.group,
            group_label=self.g_spec.display if self.g_spec else "", mechanism=req.mechanism,
            role=req.role.value, tier=req.tier, band=band(req.tier),
            groups=list(self.group_keys), cells=list(self.cells),
            values=per_group.json_grid(values), ci_low=per_group.json_grid(ci_low),
            ci_high=per_group.json_grid(ci_high), n_estimate=self.n_hat, figure=self.figure,
            statistic_label=self.statistic_label, error_unit=self.error_unit(), flags=notes,
            privacy_unit=self.privacy_unit, contribution=self.contribution, **fields,
        )

    def error_unit(self) -> str:
        return self.x_spec.unit

    # -- paper mode (PyDPLib) ----------------------------------------------------------------
    paper_noise_groups: ClassVar[bool] = False

    def paper(self, inp: st.Inputs, noise_factor: int, rng: np.random.Generator) -> PaperOut:
        """PyDPLib's per-record noising of this statistic, per group."""
        groups = (inp.groups if inp.groups is not None
                  else np.full(len(inp.values), st.ALL, dtype=object))
        res = paper.grouped_statistic(
            inp.values, groups, self.paper_query, noise_factor, data_type=float, is_range=True,
            noise_groups=self.paper_noise_groups and inp.groups is not None,
            group_categories=inp.group_keys, rng=rng)
        pos = {str(k): i for i, k in enumerate(res.group_keys)}
        rows = [self.paper_row(res, pos[k]) if k in pos else [np.nan] * len(self.cells)
                for k in inp.group_keys]
        return PaperOut(np.asarray(rows, dtype=float), res.epsilon, res.sensitivity,
                        res.noise_percent, res.effective_epsilon, res.value_result.found)

    def paper_row(self, res: paper.GroupedPaperResult, i: int) -> list[float]:
        return [float(res.values[i])]


class HistogramPlan(ViewPlan):
    """Counts per bin (and group): discrete Laplace per cell; tiers nest."""

    view = "histogram"
    statistic = Statistic.HISTOGRAM
    figure = "histogram"
    mechanism = "discrete Laplace (rounded, clamped at 0)"
    paper_query = 1

    def check_column(self, spec: ColumnSpec) -> None:
        st.histogram_bins(spec)      # raises SchemaError when bins / categories are missing

    def cell_labels(self) -> list[str]:
        return st.histogram_bins(self.x_spec)[1]

    def bins(self) -> np.ndarray | list[str]:
        return st.histogram_bins(self.x_spec)[0]

    def plan_kwargs(self) -> dict[str, Any]:
        bins = self.bins()
        return {"bins": bins if isinstance(bins, np.ndarray) else len(bins)}

    def query(self) -> AggregateQuery:
        return AggregateQuery.histogram(self.dataset.schema, self.req.x, self.req.group)

    def error_unit(self) -> str:
        return "patients" if self.privacy_unit == "patient" else "records"

    def release(self, agg: Aggregates, eps: np.ndarray, rng: np.random.Generator) -> Release:
        return sound.release_counts(agg, eps, rng=rng, bins=self.bins(),
                                    group_keys=self.group_keys, public=self.scales)

    def truth(self, agg: Aggregates) -> np.ndarray:
        return sound.true_counts(agg)

    def paper(self, inp: st.Inputs, noise_factor: int, rng: np.random.Generator) -> PaperOut:
        truth = st.row_counts(inp)            # counts computed on raw rows, then noised
        res = paper.dp_calculate(truth.ravel(), 1, noise_factor, data_type=int, is_range=True,
                                 rng=rng)
        return PaperOut(np.asarray(res.dp_data, dtype=float).reshape(truth.shape), res.epsilon,
                        res.sensitivity, res.noise_percent, res.effective_epsilon, res.found)


class _MomentPlan(ViewPlan):
    """Means and variances: noisy sufficient statistics on a fixed lattice; tiers nest."""

    figure = "bars"

    def query(self) -> AggregateQuery:
        return AggregateQuery.moments(self.dataset.schema, self.req.x, self.req.group,
                                      squares=self.statistic is Statistic.VARIANCE)

    def release(self, agg: Aggregates, eps: np.ndarray, rng: np.random.Generator) -> Release:
        return sound.release_moments(agg, eps, rng=rng, statistic=self.statistic,
                                     group_keys=self.group_keys, public=self.scales)


class MeanPlan(_MomentPlan):
    view = "mean"
    statistic = Statistic.MEAN
    statistic_label = "Mean"
    mechanism = "discrete Laplace on a fixed-point lattice (noisy sum / noisy count)"
    paper_query = 2

    def truth(self, agg: Aggregates) -> np.ndarray:
        return sound.true_means(agg)[:, None]


class VariancePlan(_MomentPlan):
    view = "variance"
    statistic = Statistic.VARIANCE
    statistic_label = "Variance of"
    mechanism = "discrete Laplace on a fixed-point lattice (noisy count, sum, sum of squares)"
    paper_query = 4

    def error_unit(self) -> str:
        return f"{self.x_spec.unit}²" if self.x_spec.unit else ""

    def truth(self, agg: Aggregates) -> np.ndarray:
        return sound.true_variances(agg)[:, None]


class BoxPlotPlan(ViewPlan):
    """The box's five quantiles from a noisy hierarchical CDF per group; tiers nest."""

    view = "median"
    statistic = Statistic.QUANTILES
    figure = "box"
    mechanism = "noisy hierarchical CDF on a candidate grid"
    paper_query = 3
    paper_noise_groups = True

    def cell_labels(self) -> list[str]:
        return [f"q{q:g}" for q in BOX_QS]

    def plan_kwargs(self) -> dict[str, Any]:
        return {"qs": BOX_QS}

    def query(self) -> AggregateQuery:
        return AggregateQuery.candidates(self.dataset.schema, self.req.x, self.req.group,
                                         n_candidates=FINE_CANDIDATES)

    def release(self, agg: Aggregates, eps: np.ndarray, rng: np.random.Generator) -> Release:
        """Each group on the grid its plan chose (all tiers share it)."""
        assert self.tiers is not None
        return sound.release_quantiles(agg, eps, qs=BOX_QS, rng=rng, group_keys=self.group_keys,
                                       public=self.scales,
                                       n_candidates=self.tiers.tiers[0].n_candidates)

    def truth(self, agg: Aggregates) -> np.ndarray:
        return sound.true_quantiles(agg, BOX_QS)

    def paper_row(self, res: paper.GroupedPaperResult, i: int) -> list[float]:
        q1, med, q3 = float(res.q1[i]), float(res.values[i]), float(res.q3[i])
        return [q1, q1, med, q3, q3]   # paper mode releases no whiskers


class PaperPlan:
    """Paper mode (PyDPLib) of any view: owner only and NOT differentially private.

    Its ε is searched on the data, so the plan cannot state it in advance; the ledger records
    each release with its effective ε as a lower bound of the loss, marked not DP, outside
    every sound-mode total (role budgets, the dataset-level loss). It reads rows: at most
    ``ROW_CAP`` of them (a seeded sample past that, stated on the page).
    """

    mechanism = "PyDPLib per-record Laplace (paper mode)"

    def __init__(self, view: ViewPlan) -> None:
        self.view = view
        self.key = view.key
        self.inputs: tuple[InternalSpec, ...] = ()

    def build(self, inputs: Mapping[str, Release]) -> ReleasePlan:
        return ReleasePlan(self.key, dict.fromkeys(TIERS), nestable=False,
                           mechanism=self.mechanism, dp=False)

    def compute(self, data: Callable[[], st.Inputs]) -> Compute:
        return lambda _eps, rng: self.release(data(), rng)

    def release(self, inp: st.Inputs, rng: np.random.Generator) -> Release:
        out = self.view.paper(inp, self.key.tier, rng)
        return Release(
            statistic=f"paper {self.view.view}", value=out.values,
            epsilon=float(out.effective_epsilon), mechanism=self.mechanism,
            sensitivity=float(out.sensitivity),
            params={"labelled_epsilon": float(out.epsilon),
                    "noise_percent": float(out.noise_percent), "found": bool(out.found),
                    "sample_note": inp.note})

    def publish(self, plan: ReleasePlan, rel: Release, truth: Truth | None) -> dict[str, Any]:
        values = st.as_grid(rel.value, len(self.view.group_keys))
        lo_b, hi_b = band(self.key.tier)
        p = rel.params
        note = ("ε chosen by PyDPLib's search on the data." if p["found"] else
                "No ε in the grid met the band; the closest one is used.")
        flags = ["ε searched on the raw data and range derived from the data — not "
                 "differentially private as labelled"]
        if p.get("sample_note"):
            flags.append(str(p["sample_note"]))
        return self.view.answer(
            values=values, ci_low=values, ci_high=values, epsilon=float(p["labelled_epsilon"]),
            mechanism_label=self.mechanism, sensitivity=f"{float(rel.sensitivity):.3g}",
            expected_error=math.nan, expected_relative_error=(lo_b + hi_b) / 2,
            calibration_note=note, dp=False, effective_epsilon=float(rel.epsilon),
            realized_noise_percent=float(p["noise_percent"]), flags=tuple(flags),
        ).to_dict()


PLANS: dict[str, type[ViewPlan]] = {
    cls.view: cls for cls in (HistogramPlan, MeanPlan, VariancePlan, BoxPlotPlan)
}
"""The plan class of every view named in ``queries.VIEWS``."""


def plan_for(dataset: Any, req: ViewRequest, payer: Role, *,
             plan_store: Any = None) -> ViewPlan | PaperPlan:
    """The plan of ``req`` (already validated and clamped), paid for by ``payer``; its ε
    plans are shared through ``plan_store`` (the ledger) when given."""
    view = PLANS[req.view](dataset, req, payer, plan_store=plan_store)
    return PaperPlan(view) if req.mechanism == "paper" else view
