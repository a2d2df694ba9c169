"""``Release``: one DP answer with everything needed to label, cache and refine it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_ARRAY_FIELDS = ("value", "expected_error", "ci_low", "ci_high", "expected_relative_error")


@dataclass(frozen=True, eq=False)
class Release:
    """A sound-mode release.

    ``value`` is the DP answer after post-processing (rounded / clamped / sorted);
    grouped statistics put the groups on the leading axis. ``expected_error`` and
    ``ci_low``/``ci_high`` (95 %) come from public inputs and the release's own noisy
    numbers only (post-processing). ``noisy`` holds the raw noisy sufficient statistics
    (server-side only, used to refine to a noisier tier); ``scales[name]`` is the
    noise scale of that component in value units (one per group when the groups have
    their own ε): discrete-Laplace noise on the lattice ``params["grid"][name]`` with
    P(k·grid) ∝ exp(−|k|·grid/scale).

    ``expected_relative_error`` (percent, one per group) is the expected absolute error over
    the statistic's own scale (``params["error_scale"]`` says which public estimate).

    Per-group ε: ``epsilon`` is the largest ε over the groups (what the view costs under
    parallel composition) and ``params["epsilon_by_group"]`` lists each group's ε;
    ``withheld`` (one bool per group, or False) marks groups that got no draw at all: their
    value is NaN and must be shown as withheld, never as a number.
    """

    statistic: str
    value: Any
    epsilon: float
    mechanism: str
    sensitivity: float | dict[str, float]
    params: Mapping[str, Any] = field(default_factory=dict)
    expected_error: Any = math.nan
    ci_low: Any = math.nan
    ci_high: Any = math.nan
    noisy: Mapping[str, np.ndarray] = field(default_factory=dict)
    scales: Mapping[str, Any] = field(default_factory=dict)
    withheld: Any = False
    expected_relative_error: Any = math.nan

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (lists, floats, None for NaN) for the SQL ledger."""
        return {
            "statistic": self.statistic,
            "value": jsonable(self.value),
            "epsilon": float(self.epsilon),
            "mechanism": self.mechanism,
            "sensitivity": jsonable(self.sensitivity),
            "params": jsonable(self.params),
            "expected_error": jsonable(self.expected_error),
            "ci_low": jsonable(self.ci_low),
            "ci_high": jsonable(self.ci_high),
            "noisy": jsonable(self.noisy),
            "scales": jsonable(self.scales),
            "withheld": jsonable(self.withheld),
            "expected_relative_error": jsonable(self.expected_relative_error),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Release:
        """Inverse of ``to_dict``: lists become numpy arrays again."""
        arrays = {name: _unjson(d.get(name)) for name in _ARRAY_FIELDS}
        arrays["withheld"] = _flags(d.get("withheld", False))
        return cls(
            statistic=d["statistic"],
            epsilon=float(d["epsilon"]),
            mechanism=d["mechanism"],
            sensitivity=d["sensitivity"],
            params=dict(d.get("params") or {}),
            noisy={k: np.asarray(_nan(v), dtype=float) for k, v in (d.get("noisy") or {}).items()},
            scales={k: _scale(v) for k, v in (d.get("scales") or {}).items()},
            **arrays,
        )


def jsonable(obj: Any) -> Any:
    """numpy arrays/scalars, tuples and mappings as plain JSON types; NaN/inf as None."""
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _nan(obj: Any) -> Any:
    """None back to NaN, recursively in lists."""
    if obj is None:
        return math.nan
    if isinstance(obj, list):
        return [_nan(v) for v in obj]
    return obj


def _scale(obj: Any) -> Any:
    """A noise scale: one float, or one per group (NaN for a withheld group)."""
    if isinstance(obj, list):
        return np.asarray(_nan(obj), dtype=float)
    return float(_nan(obj))


def _flags(obj: Any) -> Any:
    """Withheld flags: False, or one bool per group."""
    if isinstance(obj, list):
        return np.asarray(obj, dtype=bool)
    return bool(obj)


def _unjson(obj: Any) -> Any:
    """A list becomes an array (int if all ints); a scalar stays a scalar."""
    obj = _nan(obj)
    if isinstance(obj, list):
        arr = np.asarray(obj)
        return arr if arr.dtype.kind in "iub" else arr.astype(float)
    return obj
