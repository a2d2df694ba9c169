"""``Release``: one DP answer with everything needed to label, cache and refine it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_ARRAY_FIELDS = ("value", "expected_error", "ci_low", "ci_high")


@dataclass(frozen=True, eq=False)
class Release:
    """A sound-mode release.

    ``value`` is the DP answer after post-processing (rounded / clamped / sorted);
    grouped statistics put the groups on the leading axis. ``expected_error`` and
    ``ci_low``/``ci_high`` (95 %) come from public inputs only (ε, bounds, bins and
    a public size estimate). ``noisy`` holds the raw noisy sufficient statistics
    (server-side only, used to refine to a noisier tier); ``scales[name]`` is the
    noise scale of that component in value units: discrete-Laplace noise on the
    lattice ``params["grid"][name]`` with P(k·grid) ∝ exp(−|k|·grid/scale).
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
    scales: Mapping[str, float] = field(default_factory=dict)

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
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Release:
        """Inverse of ``to_dict``: lists become numpy arrays again."""
        arrays = {name: _unjson(d.get(name)) for name in _ARRAY_FIELDS}
        return cls(
            statistic=d["statistic"],
            epsilon=float(d["epsilon"]),
            mechanism=d["mechanism"],
            sensitivity=d["sensitivity"],
            params=dict(d.get("params") or {}),
            noisy={k: np.asarray(_nan(v), dtype=float) for k, v in (d.get("noisy") or {}).items()},
            scales={k: float(v) for k, v in (d.get("scales") or {}).items()},
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


def _unjson(obj: Any) -> Any:
    """A list becomes an array (int if all ints); a scalar stays a scalar."""
    obj = _nan(obj)
    if isinstance(obj, list):
        arr = np.asarray(obj)
        return arr if arr.dtype.kind in "iub" else arr.astype(float)
    return obj
