"""View plans shared by every worker: kept in the ledger's database by a hash of their inputs.

A view's per-group ε plan (``dp_engine.sound.plan_tiers``) is a pure function of public
inputs (the DP group sizes and pilot, the column's public bounds, the view) and of the
planning code; a box plot's takes seconds. Each process memoizes its own plans
(``services/views/inputs.py``); this module lets a plan computed by one worker (or its
runner child) serve the others and survive a restart. The key hashes the memo key and the
source of the planning modules, so a new version of the planning code never reads an old
plan. The payload is JSON (numbers round-trip exactly), never pickle.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from functools import lru_cache
from typing import Any

import numpy as np

from dp_engine.sound import accuracy, pilot, plan
from dp_engine.sound.plan import GroupPlan, TierPlan
from dp_engine.sound.releases import quantile_error, quantiles

PLANNING_MODULES = (plan, quantile_error, quantiles, accuracy, pilot)
"""The engine modules a plan's numbers come from: a change to any of them is a new key."""


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the planning modules' source (computed once per process)."""
    h = hashlib.sha256()
    for module in PLANNING_MODULES:
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def digest(memo_key: tuple) -> str:
    """The stored plan's key: the memo key (public inputs) and the planning code."""
    return hashlib.sha256(f"{code_fingerprint()}|{memo_key!r}".encode()).hexdigest()


def _array(a: np.ndarray | None) -> dict[str, Any] | None:
    if a is None:
        return None
    a = np.asarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": a.ravel().tolist()}


def _unarray(d: dict[str, Any] | None) -> np.ndarray | None:
    if d is None:
        return None
    return np.asarray(d["data"], dtype=np.dtype(d["dtype"])).reshape(d["shape"])


def encode(tiers: TierPlan) -> str:
    """``tiers`` as JSON; a plan carrying ``extra`` fields is refused (not round-trippable)."""
    out = {}
    for t, g in tiers.tiers.items():
        if g.extra:
            raise ValueError("a plan with extra fields is not stored")
        out[str(int(t))] = {
            "statistic": g.statistic, "noise_factor": int(g.noise_factor),
            "band": [float(b) for b in g.band], "ceiling": float(g.ceiling),
            "epsilon": _array(g.epsilon), "expected_error": _array(g.expected_error),
            "expected_relative_error": _array(g.expected_relative_error),
            "median_relative_error": _array(g.median_relative_error),
            "reasons": list(g.reasons), "n_candidates": _array(g.n_candidates)}
    return json.dumps({"tiers": out}, separators=(",", ":"))


def decode(text: str) -> TierPlan:
    """The ``TierPlan`` that ``encode`` wrote, number for number."""
    return TierPlan({int(t): GroupPlan(
        g["statistic"], int(g["noise_factor"]), (float(g["band"][0]), float(g["band"][1])),
        float(g["ceiling"]), _unarray(g["epsilon"]), _unarray(g["expected_error"]),
        _unarray(g["expected_relative_error"]), _unarray(g["median_relative_error"]),
        tuple(g["reasons"]), _unarray(g["n_candidates"]))
        for t, g in json.loads(text)["tiers"].items()})
