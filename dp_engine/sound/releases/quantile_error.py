"""The expected error of a quantile release, from public inputs only.

Two models: ``expected_quantile_error`` runs the mechanism (public seed) on a proxy of each
group — n̂_g typical points of its public shape (DP pilot, ``pilot.GroupScales``) — and
measures the error against the proxy's own grid quantiles; ``uniform_quantile_error`` is a
closed form for values spread evenly over the bounds (no pilot).

A release's error label uses ``expected_quantile_error``; planning, which asks about a
hundred points per box plot, uses the same model with its noise drawn once per grid
(``quantile_bank``), checked against this simulation by tests/unit/test_quantile_bank.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dp_engine.memo import Memo
from dp_engine.sound import quantile_mechanisms as qm
from dp_engine.sound.accuracy import relative_error
from dp_engine.sound.aggregates import CandidateCounts, coarsen
from dp_engine.sound.pilot import GroupScales
from dp_engine.sound.releases.common import (
    FINE_CANDIDATES,
    SIM_RUNS,
    SIM_SEED,
    array_key,
    scales_key,
)
from dp_engine.sound.spread import band_levels


def uniform_quantile_error(width: float, n: Any, eps: Any, qs: Sequence[float], k: int,
                           n_candidates: Any, method: str = "cdf") -> np.ndarray:
    """Closed-form E|error| per (group, level) when n values spread evenly over the range.

    The noisy CDF crosses q·N̂ off by the rank noise D at the quantile (normal approx.:
    E|D| = sd·√(2/π)), i.e. by E|D|·width/n in value, plus a quarter grid step. For the
    exponential mechanisms: rank error ≈ 2Δ/ε_level (Laplace). Capped at width/2.
    """
    n = np.maximum(np.asarray(n, dtype=float).reshape(-1), 1.0)
    eps = np.broadcast_to(np.asarray(eps, dtype=float).reshape(-1), n.shape)
    cs = np.broadcast_to(np.asarray(n_candidates).reshape(-1), n.shape).astype(int)
    levels = np.asarray(qs, dtype=float)
    out = np.empty((n.size, levels.size))
    for c in np.unique(cs):
        rows = cs == c
        step = width / (c - 1)
        e = eps[rows][:, None]
        if method == "cdf":
            b = qm.default_branching(c + 1)
            t = k * qm.TreeShape(c + 1, b).levels / e
            mom = qm.prefix_moments(c + 1, b)
            pos = np.clip(np.rint(levels * (c - 1)).astype(int), 0, c - 1)
            sum2 = levels**2 * mom[0][pos] - 2 * levels * mom[1][pos] + mom[2][pos]
            a = np.exp(-1.0 / t)
            rank = np.sqrt(2.0 * a / (1.0 - a) ** 2 * np.maximum(sum2, 0.0)) * math.sqrt(
                2 / math.pi)
        elif method == "joint":
            rank = 2.0 * 2.0 * k / e * np.ones_like(levels)
        else:
            rank = 2.0 * k * np.maximum(levels, 1 - levels) * levels.size / e
        out[rows] = np.minimum(rank * width / n[rows][:, None] + step / 4.0, width / 2.0)
    return out


Errors = tuple[np.ndarray, np.ndarray, np.ndarray]
"""E|error| per (group[, ε], level), mean and median relative error % per group[, ε]."""

_memo: Memo[Errors] = Memo(512, read_only=True)


def expected_quantile_error(public: GroupScales, eps: np.ndarray, qs: Sequence[float],
                            k: int, method: str, n_candidates: Any,
                            runs: int = SIM_RUNS, fine_candidates: int = FINE_CANDIDATES
                            ) -> Errors:
    """(E|error| per level, mean and median relative error in %) per group, by simulation.

    The mechanism runs ``runs`` times (public seed) on each group's proxy: n̂_g typical
    points of its public shape, counted on the fine grid (where the owner's truth lives) and
    coarsened to the group's release grid ``n_candidates`` (one, or one per group), as a
    real release is. ``eps`` is (groups,) or (groups, K) for K ε per group; the outputs
    gain that K axis. Memoized (read-only arrays): the simulation is a pure function of its
    public inputs and its fixed seed, and planning asks the same point about half the time
    (the grid chosen on a first pass is often the one every tier is then planned on).
    """
    key = (scales_key(public), array_key(eps), tuple(float(q) for q in qs), int(k),
           str(method), array_key(n_candidates), int(runs), int(fine_candidates))
    return _memo.get(key, lambda: _simulate(public, eps, qs, k, method, n_candidates, runs,
                                            fine_candidates))


def error_grid(eps: np.ndarray, groups: int, n_candidates: Any, levels: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Errors]:
    """The set-up of both error models: ε as (groups, K), where it is live (finite, > 0),
    the grid size per group, and the outputs (``Errors`` with the K axis), NaN until
    computed."""
    eps2 = np.asarray(eps, dtype=float).reshape(groups, -1)
    kk = eps2.shape[1]
    cs = np.broadcast_to(np.asarray(n_candidates).reshape(-1), (groups,)).astype(int)
    outs = (np.full((groups, kk, levels), np.nan), np.full((groups, kk), np.nan),
            np.full((groups, kk), np.nan))
    return eps2, np.isfinite(eps2) & (eps2 > 0), cs, outs


def as_given(eps: np.ndarray, outs: Errors) -> Errors:
    """The outputs without the K axis when ``eps`` gave one ε per group."""
    if np.ndim(eps) == 1:
        err, rel_mean, rel_median = outs
        return err[:, 0], rel_mean[:, 0], rel_median[:, 0]
    return outs


def proxy_and_truth(public: GroupScales, c: int, qs: Sequence[float], fine_candidates: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(each group's proxy counted on grid c, (groups, c + 1); its true quantiles on the
    fine grid, where the owner's truth lives)."""
    fine_c = fine_candidates if (fine_candidates - 1) % (c - 1) == 0 else c
    fine = public.proxy_candidates(fine_c)
    truth_idx = qm.true_indices(fine, qs)
    truth = np.linspace(public.lower, public.upper, fine_c)[np.maximum(truth_idx, 0)]
    proxy = coarsen(CandidateCounts(public.lower, public.upper, fine_c, fine), c).counts
    return proxy, truth


def _simulate(public: GroupScales, eps: np.ndarray, qs: Sequence[float], k: int, method: str,
              n_candidates: Any, runs: int, fine_candidates: int) -> Errors:
    """``expected_quantile_error`` computed (see there)."""
    m = len(qs)
    eps2, live, cs, outs = error_grid(eps, public.groups, n_candidates, m)
    err, rel_mean, rel_median = outs
    kk = eps2.shape[1]
    rng = np.random.default_rng(SIM_SEED)
    for c in np.unique(cs):
        rows = np.flatnonzero(live.any(axis=1) & (cs == c))
        if rows.size == 0:
            continue
        proxy, truth = proxy_and_truth(public.take(rows), int(c), qs, fine_candidates)
        grid = np.linspace(public.lower, public.upper, c)
        step = grid[1] - grid[0]
        e = np.where(live[rows], eps2[rows], np.nan).reshape(-1)            # (rows·K,)
        tiled = np.repeat(np.repeat(proxy, kk, axis=0), runs, axis=0)
        e_runs = np.repeat(e, runs)
        if method == "cdf":
            got = qm.invert(qm.noisy_cdf(tiled, e_runs, k, rng), qs)
            est = np.minimum(public.lower + np.maximum(got, 0) * step + step / 2, public.upper)
        else:
            fn = qm.independent if method == "independent" else qm.joint
            got = fn(tiled, e_runs, qs, k, rng)
            est = grid[np.maximum(got, 0)]
        est = np.where(got >= 0, est, np.nan).reshape(rows.size, kk, runs, m)
        tr = np.broadcast_to(truth[:, None, None, :], est.shape)
        err[rows] = np.abs(est - tr).mean(axis=2)
        held = band_levels(qs)        # the levels the band holds (the box), spread.py
        rel = 100.0 * relative_error(est[..., held], tr[..., held])
        rel_mean[rows] = rel.mean(axis=2)
        rel_median[rows] = np.median(rel, axis=2)
    return as_given(eps, outs)
