"""Auto-tune: the seed paper's "iterative query" run by the studio itself.

Run the query at the current ε; if the metrics meet the tolerances, stop (step 11);
otherwise take the run's cost off the budget (step 8), stop if the next run would not fit
(steps 9, 12), else change ε and run again (step 10). Here ε moves multiplicatively: up by
``factor`` while the utility tolerances fail (more ε, less noise), and the loop stops when
the privacy tolerance (a minimum Privacy Match %) fails, since more ε only lowers it further.
Every run is charged by the caller's ``run`` (the ledger's door); this module only decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dp_engine.release.metrics import TableMetrics
from dp_engine.release.techniques import ColumnChoice, record_epsilon

MAX_TRIES = 12


@dataclass(frozen=True)
class Check:
    """One tolerance against one copy: the value, the limit, whether it is met, and the
    column (or pair of columns) that sets the value (None for a mean over columns)."""

    name: str                    # "Error", "KS distance", ...
    value: float
    limit: float
    unit: str                    # "%" or ""
    column: str | None
    minimum: bool = False        # the limit is a floor (Privacy Match), not a ceiling

    @property
    def met(self) -> bool:
        return self.value >= self.limit if self.minimum else self.value <= self.limit


@dataclass(frozen=True)
class Tolerances:
    """What counts as good enough; None: not checked."""

    max_privacy_error: float | None = None   # % (mean over numeric columns)
    max_ks: float | None = None              # largest KS distance over numeric columns
    max_corr_diff: float | None = None       # largest |Δ correlation|
    max_total_variation: float | None = None  # largest category-share distance
    min_privacy_match: float | None = None   # % (mean over columns): the privacy side

    def utility_failures(self, m: TableMetrics) -> list[str]:
        """The utility tolerances the metrics miss (empty: all met)."""
        out = []
        checks = (
            ("Privacy Error", self.max_privacy_error, m.overall("privacy_error"), "%"),
            ("KS distance", self.max_ks, _largest(m, "ks"), ""),
            ("correlation difference", self.max_corr_diff, m.corr_max_diff, ""),
            ("category share distance", self.max_total_variation,
             _largest(m, "total_variation"), ""),
        )
        for label, limit, value, unit in checks:
            if limit is not None and math.isfinite(value) and value > limit:
                out.append(f"{label} {value:.3g}{unit} > {limit:g}{unit}")
        return out

    def checks(self, m: TableMetrics) -> list[Check]:
        """Every tolerance that is set and measurable on ``m``, with the column that sets
        its value (the worst one; for a mean over columns, the column furthest off)."""
        out = []
        specs = (("Error", self.max_privacy_error, "privacy_error", "%", False, True),
                 ("KS distance", self.max_ks, "ks", "", False, False),
                 ("category share distance", self.max_total_variation, "total_variation", "",
                  False, False),
                 ("Privacy Match", self.min_privacy_match, "privacy_match", "%", True, True))
        for name, limit, metric, unit, minimum, mean in specs:
            if limit is None:
                continue
            value = m.overall(metric) if mean else _largest(m, metric)
            if math.isfinite(value):
                out.append(Check(name, value, limit, unit, _worst(m, metric, low=minimum),
                                 minimum))
        if self.max_corr_diff is not None and math.isfinite(m.corr_max_diff):
            out.insert(2, Check("correlation difference", m.corr_max_diff,
                                self.max_corr_diff, "", _worst_pair(m)))
        return out

    def privacy_failure(self, m: TableMetrics) -> str | None:
        value = m.overall("privacy_match")
        if self.min_privacy_match is not None and math.isfinite(value) \
                and value < self.min_privacy_match:
            return f"Privacy Match {value:.3g}% < {self.min_privacy_match:g}%"
        return None


def _largest(m: TableMetrics, name: str) -> float:
    vals = [getattr(c, name) for c in m.columns.values()]
    vals = [v for v in vals if math.isfinite(v)]
    return max(vals) if vals else math.nan


def _worst(m: TableMetrics, name: str, *, low: bool = False) -> str | None:
    """The column whose ``name`` is largest (smallest with ``low``), None if none has it."""
    vals = [(getattr(c, name), n) for n, c in m.columns.items()
            if math.isfinite(getattr(c, name))]
    if not vals:
        return None
    return (min(vals) if low else max(vals))[1]


def _worst_pair(m: TableMetrics) -> str | None:
    """"A × B": the pair of columns whose correlation moved most."""
    d = np.abs(m.corr_dp - m.corr_original)
    if d.size == 0:
        return None
    d = np.where(np.isfinite(d) & ~np.eye(d.shape[0], dtype=bool), d, -1.0)
    i, j = np.unravel_index(int(np.argmax(d)), d.shape)
    return None if d[i, j] < 0 else f"{m.corr_names[i]} × {m.corr_names[j]}"


@dataclass(frozen=True)
class Try:
    """One run of the loop: the ε multiplier, what it cost, what it gave."""

    scale: float
    cost: float
    metrics: TableMetrics
    failures: tuple[str, ...]

    @property
    def met(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class TuneResult:
    tries: tuple[Try, ...]
    stopped: str                 # "tolerance", "budget", "privacy" or "tries"
    spent: float
    message: str
    chosen: int | None = None    # index of the try that met every tolerance
    extra: dict = field(default_factory=dict)


def scaled(choices: Sequence[ColumnChoice], scale: float) -> list[ColumnChoice]:
    return [c.with_epsilon(c.epsilon * scale) if c.technique.uses_epsilon else c
            for c in choices]


def auto_tune(choices: Sequence[ColumnChoice], run: Callable[[list[ColumnChoice]], TableMetrics],
              tolerances: Tolerances, budget: float, *, factor: float = 2.0,
              max_tries: int = MAX_TRIES) -> TuneResult:
    """The iterative query; ``run(choices)`` releases a copy (charged) and returns metrics."""
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError("The auto-tune budget must be a number greater than 0.")
    if factor <= 1:
        raise ValueError("The ε factor must be greater than 1.")
    tries: list[Try] = []
    remaining, scale = float(budget), 1.0
    while True:
        current = scaled(choices, scale)
        cost = record_epsilon(current)
        if cost > remaining * (1 + 1e-9):
            return _done(tries, "budget", budget, remaining,
                         f"The next try would cost ε = {cost:.3g}, more than the "
                         f"{remaining:.3g} left of the auto-tune budget.")
        metrics = run(current)
        remaining -= cost
        privacy = tolerances.privacy_failure(metrics)
        failures = tolerances.utility_failures(metrics) + ([privacy] if privacy else [])
        tries.append(Try(scale, cost, metrics, tuple(failures)))
        if not failures:
            return _done(tries, "tolerance", budget, remaining,
                         f"Try {len(tries)} met every tolerance.", chosen=len(tries) - 1)
        if privacy:
            return _done(tries, "privacy", budget, remaining,
                         f"{privacy}: more ε would only lower it; relax a tolerance.")
        if len(tries) >= max_tries:
            return _done(tries, "tries", budget, remaining, f"Stopped after {len(tries)} tries.")
        scale *= factor


def _done(tries: list[Try], stopped: str, budget: float, remaining: float, message: str,
          chosen: int | None = None) -> TuneResult:
    return TuneResult(tuple(tries), stopped, budget - remaining, message, chosen)
