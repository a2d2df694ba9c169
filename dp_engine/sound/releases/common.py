"""Shared by the releases: ε per group, the noise draw, public parameters."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dp_engine.errors import DataTypeError
from dp_engine.sound.mechanisms import dlap_noise
from dp_engine.sound.pilot import GroupScales
from dp_engine.sound.validation import check_epsilon

LEVEL = 0.95
"""The level of every stated interval."""
BUILD_LEVEL = 0.96
"""Count, mean and variance intervals are built at 96 %: the 95 % claim then holds with a
margin (means and variances plug in their own estimate; docs/accuracy.md)."""
FINE_CANDIDATES = 1001     # the aggregates' grid: the owner's true quantiles live on it
SIM_SEED = 20_211_018      # public seed of the error simulations (no data involved)
SIM_RUNS = 200


def group_epsilons(epsilon: Any, n_groups: int) -> tuple[np.ndarray, bool]:
    """(ε per group, NaN where withheld; True if ε was given per group)."""
    if np.ndim(epsilon) == 0:
        return np.full(n_groups, check_epsilon(epsilon)), False
    try:
        eps = np.asarray(epsilon, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise DataTypeError(f"Give one ε per group (numbers), got {epsilon!r}.") from None
    if eps.size != n_groups:
        raise DataTypeError(f"Give one ε per group: {n_groups} groups, {eps.size} values.")
    withheld = np.isnan(eps) | (eps == 0)
    for value in eps[~withheld]:
        check_epsilon(value)
    return np.where(withheld, np.nan, eps), True


def total_epsilon(eps: np.ndarray) -> float:
    live = eps[np.isfinite(eps)]
    return float(live.max()) if live.size else 0.0


def per_group_value(value: np.ndarray, per_group: bool) -> Any:
    """One float for a release with one ε, else the per-group array."""
    if per_group:
        return value
    return float(value.reshape(-1)[0])


def noise_rows(true: np.ndarray, t_units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """true + discrete Laplace with one scale per row (lattice units); NaN rows withheld."""
    t = np.asarray(t_units, dtype=float).reshape((-1,) + (1,) * (np.ndim(true) - 1))
    live = np.isfinite(t)
    noise = dlap_noise(np.where(live, t, 1.0), np.shape(true), rng)
    return np.where(live, np.asarray(true, dtype=float) + noise, np.nan)


def base_params(eps: np.ndarray, per_group: bool, k: int, group_keys) -> dict[str, Any]:
    params: dict[str, Any] = {"contribution": int(k)}
    if per_group:
        params["epsilon_by_group"] = [None if not math.isfinite(e) else float(e) for e in eps]
    if group_keys is not None:
        params["group_keys"] = list(group_keys)
    return params


def withheld_flags(eps: np.ndarray, per_group: bool) -> Any:
    flags = ~np.isfinite(eps)
    return flags if per_group else False


def check_keys(group_keys, n_groups: int) -> list | None:
    if group_keys is None:
        return None
    keys = list(group_keys)
    if len(keys) != n_groups:
        raise DataTypeError(f"{n_groups} groups in the aggregates but {len(keys)} group keys.")
    return keys


def check_n(n_estimate: Any, n_groups: int) -> list[float]:
    """A public size estimate: one finite number, or one per group."""
    try:
        arr = np.asarray(n_estimate, dtype=float)
    except (TypeError, ValueError):
        arr = np.array(np.nan)
    if not np.isfinite(arr).all() or arr.ndim > 1 or arr.size not in (1, n_groups):
        raise DataTypeError(
            f"n_estimate must be a finite DP-released count, or one per group ({n_groups}); "
            f"got {n_estimate!r}."
        )
    return np.broadcast_to(arr, (n_groups,)).tolist() if arr.size > 1 else arr.tolist()


def check_public(public: GroupScales, n_groups: int) -> None:
    if public.groups != n_groups:
        raise DataTypeError(
            f"The public scales describe {public.groups} groups, the aggregates {n_groups}."
        )


def public_params(public: GroupScales) -> dict[str, Any]:
    return {"n_hat": public.n_hat.tolist(), "edges": public.edges.tolist(),
            "shape": public.shape.tolist(), "source": public.source}


def public_from_params(params: Mapping[str, Any]) -> GroupScales | None:
    """The ``GroupScales`` a release was labelled with (None if none was given)."""
    pub = params.get("public")
    if not pub:
        return None
    edges = np.asarray(pub["edges"], dtype=float)
    return GroupScales(np.asarray(pub["n_hat"], dtype=float), float(edges[0]),
                       float(edges[-1]), edges, np.asarray(pub["shape"], dtype=float),
                       pub.get("source", ""))


def array_key(value: Any) -> tuple:
    """A hashable key for an array's exact contents (dtype, shape and bytes)."""
    a = np.asarray(value)
    return (a.dtype.str, a.shape, a.tobytes())


def scales_key(public: GroupScales) -> tuple:
    """A hashable key for everything a ``GroupScales`` says."""
    return (array_key(public.n_hat), array_key(public.shape), float(public.lower),
            float(public.upper), array_key(public.edges))
