"""The public answer of a sound-mode view, group by group.

Each group carries its value, its 95 % interval, its ε, its expected error (absolute and
relative, from the plan that chose its ε) and whether it is withheld; a withheld group has no
value and no interval, only the reason. The owner also gets each group's realized noise (from
the true values of the same aggregates) and a warning for each group whose realized noise
exceeds the band. Nothing here reads data: the release and the truth are handed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dp_engine.bands import NOISE_LABELS
from dp_engine.sound.release import Release
from dp_engine.sound.spread import error_scale
from dp_engine.sound.statistic import Statistic
from dp_engine.sound.truth import realized_relative_error
from services.ledger.plan import ReleasePlan
from services.views import statistics as st
from services.views.answer import ViewAnswer

if TYPE_CHECKING:
    from services.views.plans import ViewPlan

ERROR_DEFINITION = (
    "Relative error = the absolute error over a public scale of the group: its mean count per "
    "bin for a histogram, its standard deviation for a mean, its variance for a variance, and "
    "its 90 % range (95th minus 5th percentile) for a box plot, whose median and quartiles "
    "are held to the band (the whiskers are less precise: see their intervals). The scales "
    "come from the dataset's public calibration, never from the data. The same definition "
    "sets the noise band, the expected errors shown and the owner's realized noise."
)


def json_grid(arr: Any) -> list[list[float | None]]:
    return [_listed(row) for row in np.asarray(arr, dtype=float)]


def _listed(arr: np.ndarray) -> list[float | None]:
    return [float(v) if math.isfinite(float(v)) else None for v in np.asarray(arr, dtype=float)]


def sensitivity_text(rel: Release, unit: str, k: int) -> str:
    """S_f in words, and what one patient (or row) may change."""
    sens = rel.sensitivity
    if isinstance(sens, dict):
        text = ", ".join(f"{name} {float(v):.3g}" for name, v in sens.items())
    else:
        text = f"{float(sens):.3g}"
    if unit == "patient":
        return f"{text} (per patient: at most {k} row{'s' if k != 1 else ''} each)"
    return f"{text} (per row: each row counted as one patient)"


def _note(view: ViewPlan, withheld: np.ndarray) -> str:
    lo, hi = view_band(view)
    label = f"{NOISE_LABELS[view.key.tier]} noise band ({lo:g}–{hi:g} %)"
    g = withheld.size
    shown = int((~withheld).sum())
    what = "The view" if g == 1 else f"Each of the {shown} groups shown"
    text = (f"{what} got the ε that puts its expected error in the {label}, planned from "
            "the dataset's public calibration (DP group sizes and a DP pilot of the column)")
    if g > 1:
        text += "; the view costs the largest group ε (the groups hold different patients)"
    reasons = view.reasons()
    for why in dict.fromkeys(r for r in reasons if r):
        names = ", ".join(k for k, r in zip(view.group_keys, reasons, strict=True) if r == why)
        text += f". Withheld — {why}: {names}"
    return text + "."


def view_band(view: ViewPlan) -> tuple[float, float]:
    assert view.tiers is not None
    return tuple(view.tiers.tiers[view.key.tier].band)  # type: ignore[return-value]


def publish(view: ViewPlan, plan: ReleasePlan, rel: Release,
            truth: Callable[[], np.ndarray] | None) -> ViewAnswer:
    """The answer for the paying role; ``truth`` only for the owner (realized noise)."""
    assert view.tiers is not None
    tier = view.key.tier
    g = len(view.group_keys)
    eps = view.tier_eps[tier]
    withheld = ~np.isfinite(eps)
    gp = view.tiers.tiers[tier]
    mask = withheld[:, None]
    values = np.where(mask, np.nan, st.as_grid(rel.value, g))
    ci_low = np.where(mask, np.nan, st.as_grid(rel.ci_low, g))
    ci_high = np.where(mask, np.nan, st.as_grid(rel.ci_high, g))
    err_abs = np.where(withheld, np.nan, gp.expected_error)
    err_rel = np.where(withheld, np.nan, gp.expected_relative_error)
    shown = ~withheld
    fields: dict[str, Any] = {}
    if truth is not None:
        realized = np.where(withheld, np.nan, _realized(rel, truth(), g))
        _, hi = gp.band
        warn = [f"{view.group_keys[i]}: realized noise {realized[i]:.1f} % is above the "
                f"band's {hi:g} % (a release can fall outside its band by chance; the "
                "stated 95 % interval still holds)"
                for i in np.flatnonzero(np.isfinite(realized) & (realized > hi))]
        live = realized[np.isfinite(realized)]
        fields.update(group_realized_noise_percent=_listed(realized), realized_warnings=warn,
                      realized_noise_percent=float(np.mean(live)) if live.size else None)
    return view.answer(
        values=values, ci_low=ci_low, ci_high=ci_high, epsilon=plan.epsilon(),
        mechanism_label=rel.mechanism,
        sensitivity=sensitivity_text(rel, view.privacy_unit, view.contribution),
        expected_error=float(np.max(err_abs[shown])) if shown.any() else math.nan,
        expected_relative_error=float(np.max(err_rel[shown])) if shown.any() else math.nan,
        calibration_note=_note(view, withheld),
        group_epsilon=_listed(eps), group_expected_error=_listed(err_abs),
        group_expected_relative_error=_listed(err_rel), withheld=[bool(w) for w in withheld],
        group_n_estimate=_listed(np.round(view.scales.n_hat)) if view.scales is not None
        else [], error_scale=_listed(error_scale_of(view)),
        withheld_reason=view.reasons(),
        error_definition=ERROR_DEFINITION, **fields,
    )


def error_scale_of(view: ViewPlan) -> np.ndarray:
    """Per group, the public scale its relative error is measured against (spread.py)."""
    assert view.scales is not None
    cells = len(view.cells) if view.statistic is Statistic.HISTOGRAM else 1
    return error_scale(view.statistic, view.scales, cells=cells)


def _realized(rel: Release, truth: np.ndarray, g: int) -> np.ndarray:
    """Per group, the realized relative error in percent (NaN: withheld or empty)."""
    return realized_relative_error(rel, np.asarray(truth, dtype=float).reshape(g, -1))
