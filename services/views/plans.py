"""The Explore views as release plans: one small class per view, and one for paper mode.

A view plan holds public metadata only (the dataset's id, version and schema; the request; the
paying role). With the dataset version's DP size n̂ (an internal release the ledger keeps) it
builds a priced ``ReleasePlan``: each tier's ε from the calibration (the noise factor's band of
expected error), nesting, the mechanism. It also owns what is specific to its view: the engine
call (``release``, the only code that sees rows, handed to the ledger as ``compute``), the true
values (owner only), the cell labels, the figure kind, and how the public answer is written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from dp_engine import paper, sound
from dp_engine.bands import band
from dp_engine.schema import NUMERIC_KINDS, ColumnSpec
from dp_engine.sound.release import Release
from services.identity.roles import Role
from services.ledger.plan import (
    TIERS,
    Compute,
    Epsilon,
    InternalSpec,
    ReleaseKey,
    ReleasePlan,
    epsilon_max,
)
from services.views import statistics as st
from services.views.answer import ViewAnswer
from services.views.queries import BOX_QS, VIEWS, RequestError, ViewRequest

COUNT_EPSILON = 0.1
"""ε of the one DP count per dataset version that calibration uses as its public size n̂."""
SIZE_KEY = "size"
Truth = Callable[[], np.ndarray]


class PaperOut(NamedTuple):
    """One paper-mode statistic: the grid and PyDPLib's labels for it."""

    values: np.ndarray
    epsilon: float               # the labelled ε (searched on the data)
    sensitivity: float
    noise_percent: float
    effective_epsilon: float     # a lower bound of the release's privacy loss
    found: bool


def size_spec(count_rows: Callable[[], int]) -> InternalSpec:
    """The DP size n̂ of a dataset version (an internal release, dataset-level loss only)."""
    return InternalSpec(SIZE_KEY, COUNT_EPSILON, "discrete Laplace count",
                        compute=lambda eps, rng: sound.count(np.ones(count_rows()), eps, rng=rng))


def public_size(rel: Release) -> int:
    """n̂ from its release: the noisy count, at least 1."""
    return max(1, int(round(float(np.asarray(rel.value).ravel()[0]))))


def refine_nested(parent: Release, epsilon: Epsilon, rng: np.random.Generator) -> Release:
    """A noisier tier as post-processing of ``parent``; ``parent`` itself if ε does not drop."""
    if epsilon_max(epsilon) >= parent.epsilon:
        return parent
    return sound.refine(parent, float(epsilon_max(epsilon)), rng=rng)


def _json_grid(arr: np.ndarray) -> list[list[float | None]]:
    return [[(float(v) if math.isfinite(float(v)) else None) for v in row]
            for row in np.asarray(arr, dtype=float)]


def _sensitivity_text(rel: Release) -> str:
    """S_f in words: one number, or each noisy component's, or the rank utility's."""
    sens = rel.sensitivity
    if not isinstance(sens, dict):
        return f"{float(sens):.3g}"
    if rel.statistic == "quantiles":
        return f"{max(sens.values()):.3g} (rank utility of the exponential mechanism)"
    return ", ".join(f"{k} {float(v):.3g}" for k, v in sens.items())


class ViewPlan:
    """One Explore view for one request: public metadata in, a priced ReleasePlan out."""

    view: ClassVar[str]
    statistic: ClassVar[str]          # the calibration statistic (dp_engine.sound.calibrate)
    figure: ClassVar[str]             # the figure kind (layouts/figures.py)
    mechanism: ClassVar[str]
    nestable: ClassVar[bool] = True
    statistic_label: ClassVar[str] = ""
    paper_query: ClassVar[int]        # PyDPLib's query code for paper mode

    def __init__(self, dataset: Any, req: ViewRequest, payer: Role, size: InternalSpec) -> None:
        """``dataset``: anything with ``id``, ``title``, ``version`` and a public ``schema``."""
        schema = dataset.schema
        self.dataset, self.req, self.payer = dataset, req, Role(payer)
        self.x_spec: ColumnSpec = schema.column(req.x)
        self.g_spec: ColumnSpec | None = schema.column(req.group) if req.group else None
        self.check_column(self.x_spec)
        self.group_keys = st.group_keys(self.g_spec)
        self.cells = self.cell_labels()
        self.key = ReleaseKey(str(dataset.id), str(dataset.version), req.query_key(schema),
                              req.tier, self.payer)
        self.inputs: tuple[InternalSpec, ...] = (size,)
        self.n_hat = 0

    # -- public metadata ---------------------------------------------------------------------
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

    def calibration_args(self) -> dict[str, Any]:
        lower, upper = self.x_spec.bounds()
        return {"lower": lower, "upper": upper}

    def noise_scale(self, n_hat: int) -> float:
        """The scale the calibration's relative error (and the realized noise) is taken on."""
        lower, upper = self.x_spec.bounds()
        return upper - lower

    def build(self, inputs: Mapping[str, Release]) -> ReleasePlan:
        """ε per tier from the calibration at the public n̂ (nested tiers: ε0 ≥ ε1 ≥ ε2)."""
        self.n_hat = public_size(inputs[SIZE_KEY])
        calib = {t: sound.calibrate(t, self.statistic, n=self.n_hat,
                                    n_groups=len(self.group_keys), **self.calibration_args())
                 for t in TIERS}
        eps = {0: calib[0].epsilon}
        for t in TIERS[1:]:
            eps[t] = min(calib[t].epsilon, eps[t - 1])
        return ReleasePlan(self.key, eps, self.nestable, self.mechanism,
                           refine=refine_nested if self.nestable else None,
                           info={"calibration": calib[self.key.tier], "n_hat": self.n_hat})

    # -- the data seam -----------------------------------------------------------------------
    def compute(self, data: Callable[[], st.Inputs]) -> Compute:
        """The engine call on the rows ``data`` reads (only when the ledger needs a draw)."""
        return lambda eps, rng: self.release(data(), float(epsilon_max(eps)), rng)

    def release(self, inp: st.Inputs, epsilon: float, rng: np.random.Generator) -> Release:
        raise NotImplementedError

    def truth(self, inp: st.Inputs) -> np.ndarray:
        """The un-noised statistic, shaped (groups, cells). Owner only (realized noise)."""
        rows = []
        lower, upper = self.x_spec.bounds()
        for mask in inp.masks():
            v = np.clip(inp.values[mask].astype(float), lower, upper)
            rows.append(self.true_row(v) if v.size else [np.nan] * len(self.cells))
        return np.asarray(rows, dtype=float)

    def true_row(self, values: np.ndarray) -> list[float]:
        raise NotImplementedError

    # -- the public answer -------------------------------------------------------------------
    def publish(self, plan: ReleasePlan, rel: Release, truth: Truth | None) -> dict[str, Any]:
        """The answer given to the paying role; realized noise only when ``truth`` (owner)."""
        n = len(self.group_keys)
        values = st.as_grid(rel.value, n)
        errs = np.asarray(rel.expected_error, dtype=float)
        calib = plan.info["calibration"]
        realized = None
        if truth is not None:
            realized = realized_noise_percent(values, truth(), self.noise_scale(self.n_hat))
        return self.answer(
            values=values, ci_low=st.as_grid(rel.ci_low, n), ci_high=st.as_grid(rel.ci_high, n),
            epsilon=plan.epsilon(), mechanism_label=rel.mechanism,
            sensitivity=_sensitivity_text(rel),
            expected_error=float(np.nanmean(errs)) if np.isfinite(errs).any() else math.nan,
            expected_relative_error=float(calib.expected_relative_error),
            calibration_note=calib.message, realized_noise_percent=realized,
        ).to_dict()

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
            role=req.role.value, tier=req.tier, band=band(req.tier), groups=list(self.group_keys),
            cells=list(self.cells), values=_json_grid(values), ci_low=_json_grid(ci_low),
            ci_high=_json_grid(ci_high), n_estimate=self.n_hat, figure=self.figure,
            statistic_label=self.statistic_label, error_unit=self.error_unit(), flags=notes,
            **fields,
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
    statistic = "histogram"
    figure = "histogram"
    mechanism = "discrete Laplace (rounded, clamped at 0)"
    paper_query = 1

    def check_column(self, spec: ColumnSpec) -> None:
        st.histogram_bins(spec)      # raises SchemaError when bins / categories are missing

    def cell_labels(self) -> list[str]:
        return st.histogram_bins(self.x_spec)[1]

    def calibration_args(self) -> dict[str, Any]:
        return {"bins": len(self.cells)}

    def noise_scale(self, n_hat: int) -> float:
        return max(n_hat, 1) / (len(self.group_keys) * max(len(self.cells), 1))

    def error_unit(self) -> str:
        return "patients"

    def release(self, inp: st.Inputs, epsilon: float, rng: np.random.Generator) -> Release:
        if inp.groups is not None:
            return sound.grouped_histogram(inp.values, inp.groups, inp.bins, inp.group_keys,
                                           epsilon, rng=rng)
        return sound.histogram(inp.values, inp.bins, epsilon, rng=rng)

    def truth(self, inp: st.Inputs) -> np.ndarray:
        rows = []
        for mask in inp.masks():
            v = inp.values[mask]
            if inp.categorical_x:
                counts = dict(zip(*np.unique(v.astype(str), return_counts=True), strict=True))
                rows.append([float(counts.get(b, 0)) for b in inp.bins])
            else:
                edges = np.asarray(inp.bins, dtype=float)
                clipped = np.clip(v.astype(float), edges[0], edges[-1])
                rows.append(np.histogram(clipped, bins=edges)[0].astype(float))
        return np.asarray(rows, dtype=float)

    def paper(self, inp: st.Inputs, noise_factor: int, rng: np.random.Generator) -> PaperOut:
        truth = self.truth(inp)            # counts computed on raw data, then noised
        res = paper.dp_calculate(truth.ravel(), 1, noise_factor, data_type=int, is_range=True,
                                 rng=rng)
        return PaperOut(np.asarray(res.dp_data, dtype=float).reshape(truth.shape), res.epsilon,
                        res.sensitivity, res.noise_percent, res.effective_epsilon, res.found)


class _MomentPlan(ViewPlan):
    """Means and variances: noisy sufficient statistics on a fixed lattice; tiers nest."""

    figure = "bars"

    def release(self, inp: st.Inputs, epsilon: float, rng: np.random.Generator) -> Release:
        lower, upper = self.x_spec.bounds()
        if inp.groups is not None:
            return self.grouped_engine(inp.values, inp.groups, inp.group_keys, lower, upper,
                                       epsilon, rng=rng)
        return self.engine(inp.values, lower, upper, epsilon, rng=rng)

    @staticmethod
    def engine(*args: Any, **kwargs: Any) -> Release:
        raise NotImplementedError

    @staticmethod
    def grouped_engine(*args: Any, **kwargs: Any) -> Release:
        raise NotImplementedError


class MeanPlan(_MomentPlan):
    view = "mean"
    statistic = "mean"
    statistic_label = "Mean"
    mechanism = "discrete Laplace on a fixed-point lattice (noisy sum / noisy count)"
    paper_query = 2
    engine = staticmethod(sound.mean)
    grouped_engine = staticmethod(sound.grouped_mean)

    def true_row(self, values: np.ndarray) -> list[float]:
        return [float(values.mean())]


class VariancePlan(_MomentPlan):
    view = "variance"
    statistic = "variance"
    statistic_label = "Variance of"
    mechanism = "discrete Laplace on a fixed-point lattice (noisy count, sum, sum of squares)"
    paper_query = 4
    engine = staticmethod(sound.variance)
    grouped_engine = staticmethod(sound.grouped_variance)

    def noise_scale(self, n_hat: int) -> float:
        lower, upper = self.x_spec.bounds()
        return ((upper - lower) / 2) ** 2

    def true_row(self, values: np.ndarray) -> list[float]:
        return [float(values.var())]


class BoxPlotPlan(ViewPlan):
    """DP quantiles by the exponential mechanism; tiers cannot nest (each draw counts)."""

    view = "median"
    statistic = "quantiles"
    figure = "box"
    mechanism = "exponential mechanism on a fixed candidate grid"
    nestable = False
    paper_query = 3
    paper_noise_groups = True

    def cell_labels(self) -> list[str]:
        return [f"q{q:g}" for q in BOX_QS]

    def calibration_args(self) -> dict[str, Any]:
        return {**super().calibration_args(), "qs": BOX_QS}

    def release(self, inp: st.Inputs, epsilon: float, rng: np.random.Generator) -> Release:
        """The box's five quantiles; errors labelled with the public n̂ per group."""
        lower, upper = self.x_spec.bounds()
        n_est = max(self.n_hat / len(inp.group_keys), 1.0)
        if inp.groups is not None:
            return sound.grouped_quantiles(inp.values, inp.groups, inp.group_keys, lower, upper,
                                           epsilon, qs=BOX_QS, rng=rng,
                                           n_estimate=[n_est] * len(inp.group_keys))
        return sound.quantiles(inp.values, lower, upper, epsilon, qs=BOX_QS, rng=rng,
                               n_estimate=n_est)

    def true_row(self, values: np.ndarray) -> list[float]:
        return list(np.quantile(values, BOX_QS))

    def paper_row(self, res: paper.GroupedPaperResult, i: int) -> list[float]:
        q1, med, q3 = float(res.q1[i]), float(res.values[i]), float(res.q3[i])
        return [q1, q1, med, q3, q3]   # paper mode releases no whiskers


class PaperPlan:
    """Paper mode (PyDPLib) of any view: owner only and NOT differentially private.

    Its ε is searched on the data, so the plan cannot state it in advance; the ledger records
    each release with its effective ε as a lower bound of the loss, marked not DP, outside
    every sound-mode total (role budgets, the dataset-level loss).
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
                    "noise_percent": float(out.noise_percent), "found": bool(out.found)})

    def truth(self, inp: st.Inputs) -> np.ndarray:
        return self.view.truth(inp)

    def publish(self, plan: ReleasePlan, rel: Release, truth: Truth | None) -> dict[str, Any]:
        values = st.as_grid(rel.value, len(self.view.group_keys))
        lo_b, hi_b = band(self.key.tier)
        p = rel.params
        note = ("ε chosen by PyDPLib's search on the data." if p["found"] else
                "No ε in the grid met the band; the closest one is used.")
        return self.view.answer(
            values=values, ci_low=values, ci_high=values, epsilon=float(p["labelled_epsilon"]),
            mechanism_label=self.mechanism, sensitivity=f"{float(rel.sensitivity):.3g}",
            expected_error=math.nan, expected_relative_error=(lo_b + hi_b) / 2,
            calibration_note=note, dp=False, effective_epsilon=float(rel.epsilon),
            realized_noise_percent=float(p["noise_percent"]),
            flags=("ε searched on the raw data and range derived from the data — not "
                   "differentially private as labelled",),
        ).to_dict()


PLANS: dict[str, type[ViewPlan]] = {
    cls.view: cls for cls in (HistogramPlan, MeanPlan, VariancePlan, BoxPlotPlan)
}
"""The plan class of every view named in ``queries.VIEWS``."""


def plan_for(dataset: Any, req: ViewRequest, payer: Role,
             size: InternalSpec) -> ViewPlan | PaperPlan:
    """The plan of ``req`` (already validated and clamped), paid for by ``payer``."""
    view = PLANS[req.view](dataset, req, payer, size)
    return PaperPlan(view) if req.mechanism == "paper" else view


def realized_noise_percent(dp: np.ndarray, truth: np.ndarray, scale: float) -> float | None:
    """Mean |dp − true| on the calibration's scale, in percent (owner only).

    histogram: per cell, over the average cell count n̂/(groups · bins); mean and quantiles:
    over the public width (upper − lower); variance: over the largest variance (width/2)².
    So the owner can compare it directly with the band the ε was calibrated for.
    """
    dp = np.asarray(dp, dtype=float)
    ok = np.isfinite(truth) & np.isfinite(dp)
    if not ok.any():
        return None
    return 100.0 * float(np.mean(np.abs(dp[ok] - truth[ok]))) / scale
