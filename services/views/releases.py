"""The one door to DP answers: cache, budget, nested tiers, then the engine.

For a request at tier t (the noise factor of the role it is shown at):
1. a cached answer served before to the same granted role is returned, nothing charged;
2. otherwise the tier's answer is *materialized* once per dataset version and query:
   tier 0 (least noise) is computed by the engine; tier 1 is tier 0 refined with
   independent noise, tier 2 is tier 1 refined (DESIGN.md, nested tiers), so colluding
   roles learn no more than the least-noisy of them. The dataset-level loss counts the
   least-noisy tier once. Exponential-mechanism views (box plots) cannot be nested: each
   tier is drawn independently and each counts towards the dataset-level loss;
3. the role's budget is charged and the release recorded in one ledger transaction.
Materialized answers (with raw noisy sums) stay in the server's ledger; only the
post-processed public answer is ever returned to a callback.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from dp_engine import sound
from dp_engine.bands import band
from dp_engine.errors import BudgetExceededError
from dp_engine.rng import as_generator
from services.identity.roles import Role
from services.views import statistics as st
from services.views.queries import BOX_QS, CALIBRATION_STATISTIC, ViewRequest

COUNT_EPSILON = 0.1
"""ε of the one DP count per dataset version that calibration uses as its public n."""
SYSTEM_USER = "system (materialized tiers)"


@dataclass(frozen=True)
class ViewAnswer:
    """A public answer: only DP numbers and public metadata (safe for any browser).

    ``realized_noise_percent`` is computed from the true data and set for the owner only.
    """

    dataset_id: str
    dataset_title: str
    view: str
    x: str
    x_label: str
    unit: str
    group: str | None
    group_label: str
    mechanism: str                 # "sound" | "paper"
    mechanism_label: str
    role: str
    tier: int
    band: tuple[float, float]
    epsilon: float
    sensitivity: str
    groups: list[str]
    cells: list[str]               # bin / category labels, or quantile names, or the statistic
    values: list[list[float]]
    ci_low: list[list[float]]
    ci_high: list[list[float]]
    expected_error: float
    expected_relative_error: float
    calibration_note: str
    n_estimate: int
    cached: bool = False
    epsilon_charged: float = 0.0
    budget_limit: float | None = None
    budget_spent: float = 0.0
    budget_remaining: float | None = None
    realized_noise_percent: float | None = None
    effective_epsilon: float | None = None
    flags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ViewAnswer:
        d = dict(d)
        d["band"] = tuple(d["band"])
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def _grid(rows: list[list[float | None]]) -> np.ndarray:
    """JSON rows (None for a missing value) back to a float array (NaN)."""
    return np.asarray([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


def _json_floats(arr: np.ndarray) -> list[list[float]]:
    return [[(float(v) if math.isfinite(float(v)) else None) for v in row]  # type: ignore[misc]
            for row in np.asarray(arr, dtype=float)]


class ReleaseService:
    """Answers Explore requests through the ledger (cache + budget) and the engine."""

    def __init__(self, registry, ledger, *,
                 rng_factory: Callable[[], np.random.Generator | None] = lambda: None) -> None:
        self.registry = registry
        self.ledger = ledger
        self._rng = rng_factory

    # ---- public -------------------------------------------------------------------
    def answer(self, identity, req: ViewRequest, *, dataset=None) -> ViewAnswer:
        """The answer to ``req`` for ``identity`` (role already clamped into ``req``).

        ``dataset``: the registry entry when the caller already holds it (saves a lookup).
        """
        ds = dataset if dataset is not None else self.registry.get(req.dataset_id)
        granted: Role = identity.role
        qkey = req.query_key(ds.schema)
        served_key = f"{qkey}|as={granted.value}"
        hit = self.ledger.cached(dataset_version=ds.version, query_key=served_key, tier=req.tier)
        if hit is not None:
            ans = replace(ViewAnswer.from_dict(hit.answer), cached=True, epsilon_charged=0.0)
        else:
            inp = st.inputs(req, ds.frame, ds.schema)
            ans = self._fresh(identity, req, ds, qkey, inp)
            if granted is Role.OWNER and ans.mechanism == "sound":
                # Owner-only, computed from the true values once; it is stored with the
                # owner's served copy (key "as=owner"), which no other role is ever given.
                ans = replace(ans, realized_noise_percent=st.realized_noise_percent(
                    req, inp, _grid(ans.values), st.true_values(req, inp), ans.n_estimate))
            # Paper mode is charged what it really costs (its effective ε), not its label.
            cost = ans.effective_epsilon if ans.mechanism == "paper" else ans.epsilon
            rec = self.ledger.charge_and_record(
                user=identity.user, role=granted, dataset_id=ds.id,
                dataset_version=ds.version, query_key=served_key, tier=req.tier,
                mechanism=ans.mechanism_label, epsilon=cost, answer=ans.to_dict(),
                dataset_loss=0.0,
            )
            ans = replace(ViewAnswer.from_dict(rec.answer), cached=rec.cached,
                          epsilon_charged=0.0 if rec.cached else cost)
        status = self.ledger.budget(role=granted, dataset_id=ds.id)
        ans = replace(ans, budget_limit=status.limit, budget_spent=status.spent,
                      budget_remaining=status.remaining)
        if granted is not Role.OWNER:
            ans = replace(ans, realized_noise_percent=None)   # defence in depth
        return ans

    def dp_count(self, ds) -> int:
        """The dataset's DP-released size (one release per version; public thereafter)."""
        key = json.dumps({"dataset": ds.id, "query": "count"}, sort_keys=True)
        rel = self._materialize(ds, key, 0, {0: COUNT_EPSILON}, nestable=False,
                                compute=lambda eps: sound.count(
                                    np.ones(len(ds.frame)), eps, rng=self._rng()))
        return max(1, int(round(float(np.asarray(rel.value).ravel()[0]))))

    # ---- internals ----------------------------------------------------------------
    def _fresh(self, identity, req: ViewRequest, ds, qkey: str, inp: st.Inputs) -> ViewAnswer:
        n_hat = self.dp_count(ds)
        if req.mechanism == "paper":   # owner only; PyDPLib's own search picks its ε
            return self._paper_answer(req, ds, qkey, inp, n_hat)
        eps_by_tier, calib = self._tier_epsilons(req, inp, n_hat)
        eps = eps_by_tier[req.tier]
        status = self.ledger.budget(role=identity.role, dataset_id=ds.id)
        if status.remaining is not None and eps > status.remaining + 1e-12:
            raise BudgetExceededError(
                f"This view needs ε = {eps:.3g} but the {identity.role.label.lower()} budget "
                f"on this dataset has {status.remaining:.3g} left (spent {status.spent:.3g} of "
                f"{status.limit:.3g}). Nothing was charged; views you have already seen stay "
                "available for free."
            )
        nestable = req.view != "median"
        rel = self._materialize(
            ds, qkey, req.tier, eps_by_tier, nestable=nestable,
            compute=lambda e: st.sound_release(req, inp, e, self._rng(), n_hat),
        )
        return self._public(req, ds, inp, rel, calib[req.tier], n_hat)

    def _tier_epsilons(self, req: ViewRequest, inp: st.Inputs, n_hat: int):
        stat = CALIBRATION_STATISTIC[req.view]
        kwargs: dict[str, Any] = {"n": n_hat, "n_groups": len(inp.group_keys)}
        if req.view == "histogram":
            kwargs["bins"] = len(inp.bin_labels)
        else:
            kwargs["lower"], kwargs["upper"] = inp.x_spec.bounds()
        if req.view == "median":
            kwargs["qs"] = BOX_QS
        calib = {t: sound.calibrate(t, stat, **kwargs) for t in (0, 1, 2)}
        eps = {t: calib[t].epsilon for t in (0, 1, 2)}
        # Nested tiers need ε0 ≥ ε1 ≥ ε2; calibration is monotone, enforce it anyway.
        eps[1] = min(eps[1], eps[0])
        eps[2] = min(eps[2], eps[1])
        return eps, calib

    def _materialize(self, ds, qkey: str, tier: int, eps: dict[int, float], *, nestable: bool,
                     compute: Callable[[float], sound.Release]) -> sound.Release:
        """The tier's release, computed once per dataset version (twin-safe)."""
        key = f"{qkey}|internal"
        hit = self.ledger.cached(dataset_version=ds.version, query_key=key, tier=tier)
        if hit is not None:
            return sound.Release.from_dict(hit.answer["release"])
        if tier == 0 or not nestable:
            rel, loss = compute(eps[tier]), eps[tier]
        else:   # post-processing of the tier above: adds nothing to the dataset's loss
            parent = self._materialize(ds, qkey, tier - 1, eps, nestable=True, compute=compute)
            rel = (parent if eps[tier] >= parent.epsilon
                   else sound.refine(parent, eps[tier], rng=self._rng()))
            loss = 0.0
        rec = self.ledger.charge_and_record(
            user=SYSTEM_USER, role=Role.OWNER, dataset_id=ds.id, dataset_version=ds.version,
            query_key=key, tier=tier, mechanism=rel.mechanism, epsilon=float(rel.epsilon),
            answer={"release": rel.to_dict()}, dataset_loss=loss,
        )
        return sound.Release.from_dict(rec.answer["release"])

    def _public(self, req: ViewRequest, ds, inp: st.Inputs, rel: sound.Release, calib,
                n_hat: int) -> ViewAnswer:
        n_groups = len(inp.group_keys)
        values = st.as_grid(rel.value, n_groups)
        lo = st.as_grid(rel.ci_low, n_groups)
        hi = st.as_grid(rel.ci_high, n_groups)
        errs = np.asarray(rel.expected_error, dtype=float)
        err = float(np.nanmean(errs)) if np.isfinite(errs).any() else float("nan")
        sens_txt = _sensitivity_text(rel)
        return self._answer_common(
            req, ds, inp, values=values, ci_low=lo, ci_high=hi, epsilon=float(rel.epsilon),
            mechanism_label=rel.mechanism, sensitivity=sens_txt, expected_error=err,
            expected_relative_error=float(calib.expected_relative_error),
            calibration_note=calib.message, n_hat=n_hat,
        )

    def _paper_answer(self, req: ViewRequest, ds, qkey: str, inp: st.Inputs,
                      n_hat: int) -> ViewAnswer:
        key = f"{qkey}|internal"
        hit = self.ledger.cached(dataset_version=ds.version, query_key=key, tier=req.tier)
        if hit is None:
            out = st.paper_release(req, inp, req.tier, self._rng())
            payload = {"values": _json_floats(out["values"]), "epsilon": float(out["epsilon"]),
                       "sensitivity": float(out["sensitivity"]),
                       "effective_epsilon": float(out["effective_epsilon"]),
                       "noise_percent": float(out["noise_percent"]),
                       "found": bool(out["found"])}
            hit = self.ledger.charge_and_record(
                user=SYSTEM_USER, role=Role.OWNER, dataset_id=ds.id,
                dataset_version=ds.version, query_key=key, tier=req.tier,
                mechanism="PyDPLib per-record Laplace", epsilon=payload["effective_epsilon"],
                answer=payload, dataset_loss=payload["effective_epsilon"],
            )
        p = hit.answer
        values = _grid(p["values"])
        lo_b, hi_b = band(req.tier)
        note = ("ε chosen by PyDPLib's search on the data." if p["found"] else
                "No ε in the grid met the band; the closest one is used.")
        return self._answer_common(
            req, ds, inp, values=values, ci_low=values, ci_high=values,
            epsilon=p["epsilon"], mechanism_label="PyDPLib per-record Laplace (paper mode)",
            sensitivity=f"{p['sensitivity']:.3g}", expected_error=float("nan"),
            expected_relative_error=(lo_b + hi_b) / 2, calibration_note=note, n_hat=n_hat,
            effective_epsilon=p["effective_epsilon"],
            realized=p["noise_percent"],
            extra_flags=["ε searched on the raw data and range derived from the data — "
                         "not differentially private as labelled"],
        )

    def _answer_common(self, req: ViewRequest, ds, inp: st.Inputs, *, values, ci_low, ci_high,
                       epsilon: float, mechanism_label: str, sensitivity: str,
                       expected_error: float, expected_relative_error: float,
                       calibration_note: str, n_hat: int, effective_epsilon: float | None = None,
                       realized: float | None = None,
                       extra_flags: list[str] | None = None) -> ViewAnswer:
        flags = list(extra_flags or [])
        for spec in (inp.x_spec, inp.g_spec):
            if spec is not None and spec.derived_from_data:
                flags.append(f"Metadata of '{spec.label}' was derived from the data — "
                             "not private until the owner confirms it.")
        if req.view == "histogram":
            cells = inp.bin_labels
        elif req.view == "median":
            cells = [f"q{q:g}" for q in BOX_QS]
        else:
            cells = [req.view]
        return ViewAnswer(
            dataset_id=ds.id, dataset_title=ds.title, view=req.view, x=req.x,
            x_label=inp.x_spec.display, unit=inp.x_spec.unit, group=req.group,
            group_label=inp.g_spec.display if inp.g_spec else "",
            mechanism=req.mechanism, mechanism_label=mechanism_label, role=req.role.value,
            tier=req.tier, band=band(req.tier), epsilon=float(epsilon), sensitivity=sensitivity,
            groups=list(inp.group_keys), cells=list(cells), values=_json_floats(values),
            ci_low=_json_floats(ci_low), ci_high=_json_floats(ci_high),
            expected_error=expected_error, expected_relative_error=expected_relative_error,
            calibration_note=calibration_note, n_estimate=n_hat,
            effective_epsilon=effective_epsilon, flags=flags, realized_noise_percent=realized,
        )


def _sensitivity_text(rel: sound.Release) -> str:
    """S_f in words: one number, or each noisy component's, or the rank utility's."""
    sens = rel.sensitivity
    if not isinstance(sens, dict):
        return f"{float(sens):.3g}"
    if rel.statistic == "quantiles":
        return f"{max(sens.values()):.3g} (rank utility of the exponential mechanism)"
    return ", ".join(f"{k} {float(v):.3g}" for k, v in sens.items())


def new_rng_factory(seed: int | None) -> Callable[[], np.random.Generator]:
    """Reproducible generators for tests (seeded) or OS-seeded ones (production)."""
    if seed is None:
        return lambda: as_generator(None)
    seq = np.random.SeedSequence(seed)
    return lambda: np.random.default_rng(seq.spawn(1)[0])
