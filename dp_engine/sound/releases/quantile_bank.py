"""Planning's quantile error model: the simulation, with its noise drawn once per grid.

``expected_quantile_error`` builds, for every group, every ε and every run, a fresh noisy
tree and makes it consistent: that is where the seconds of pricing a box plot go. But the
tree's noise does not depend on the data, and the consistency step is linear: the noise
of the consistent prefix counts is a fixed linear map of the node noise. So this module
draws, once per grid (public seed), ``RUNS`` consistent noise processes at unit scale — the
prefix noise at every candidate and the noise of the total — and a release at scale t then
reads F(o) + t·Z(o) ≥ q·(N + t·Z_N) for every group and ε from the same processes (common
random numbers: the error curves are smooth in ε, which the plan's crossing search wants).

What differs from the simulation: the node noise is Laplace at the discrete Laplace's
variance (2a/(1 − a)², a = e^(−1/t)) rather than discrete; for t ≳ 1 the two laws agree,
and below, where a node's noise is mostly 0, the continuous one errs wide (more error).
``tests/unit/test_quantile_bank.py`` checks the model against ``expected_quantile_error``
on several shapes, sizes and ε within Monte-Carlo tolerance.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from dp_engine.memo import Memo
from dp_engine.sound import quantile_mechanisms as qm
from dp_engine.sound.accuracy import relative_error
from dp_engine.sound.pilot import GroupScales
from dp_engine.sound.releases.common import (
    FINE_CANDIDATES,
    SIM_SEED,
    array_key,
    scales_key,
)
from dp_engine.sound.releases.quantile_error import (
    Errors,
    as_given,
    error_grid,
    proxy_and_truth,
)
from dp_engine.sound.spread import band_levels

RUNS = 128
"""Noise processes per grid (planning's QUANTILE_RUNS)."""
CHUNK_ELEMENTS = 8_000_000
"""Noisy prefixes evaluated at once (float32: 32 MB)."""

_banks: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
_bank_lock = threading.Lock()


def noise_bank(cells: int, runs: int = RUNS) -> tuple[np.ndarray, np.ndarray]:
    """(prefix noise (runs, cells − 1), total noise (runs,)) of the consistent tree over
    ``cells`` cells at unit Laplace scale per node; drawn once per (cells, runs)."""
    key = (int(cells), int(runs))
    with _bank_lock:
        hit = _banks.get(key)
    if hit is not None:
        return hit
    b = qm.default_branching(cells)
    shape = qm.TreeShape(cells, b)
    n_nodes = sum(b**d for d in range(shape.depth + 1))
    rng = np.random.default_rng([SIM_SEED, int(cells)])
    nodes = rng.laplace(size=(runs, n_nodes))
    cdf = qm.cdf_from_nodes(nodes, np.ones(runs), cells, b)
    out = (cdf.prefix, cdf.total)
    for a in out:
        a.setflags(write=False)
    with _bank_lock:
        _banks[key] = out
    return out


def effective_scale(t: np.ndarray) -> np.ndarray:
    """The Laplace scale with the discrete Laplace's variance at scale t."""
    t = np.asarray(t, dtype=float)
    a = np.exp(-1.0 / t)
    return np.sqrt(a) / (1.0 - a)


_proxy_memo: Memo[tuple[np.ndarray, np.ndarray]] = Memo(256, read_only=True)


def _proxy(public: GroupScales, c: int, qs: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """``proxy_and_truth`` on the fine grid, as the simulation builds them; memoized
    (planning asks the same scales at every ε)."""
    key = (scales_key(public), int(c), tuple(float(q) for q in qs))
    return _proxy_memo.get(key, lambda: proxy_and_truth(public, c, qs, FINE_CANDIDATES))


def _invert(prefix: np.ndarray, total: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """``quantile_mechanisms.invert`` on (..., c) noisy prefixes and (...) totals (NaN for
    the levels given as NaN)."""
    c = prefix.shape[-1]
    n = np.maximum(total, 0.0)[..., None]
    out = np.full(prefix.shape[:-1] + (len(qs),), np.nan)
    for j, q in enumerate(qs):
        if not np.isfinite(q):
            continue
        hit = prefix >= q * n
        hit[..., -1] = True
        first = np.argmax(hit, axis=-1)
        last = first.copy()
        # a miss after the first hit (a non-monotone crossing): the region ends later
        again = np.count_nonzero(hit, axis=-1) < c - first
        if again.any():
            tail = hit[again][:, ::-1]
            last[again] = c - np.argmax(~tail, axis=-1)
        out[..., j] = (first + last) / 2.0
    return out


_memo: Memo[Errors] = Memo(1024, read_only=True)


def banked_quantile_error(public: GroupScales, eps: np.ndarray, qs: Sequence[float], k: int,
                          n_candidates: Any, runs: int = RUNS, band_only: bool = False
                          ) -> Errors:
    """``expected_quantile_error`` of the noisy CDF (memoized, read-only arrays): see
    ``_banked``. Planning asks the same points again (tiers sharing a ceiling share their
    ε grid; a first-pass grid is often the one every tier is then planned on)."""
    key = (scales_key(public), array_key(eps), tuple(float(q) for q in qs), int(k),
           array_key(n_candidates), int(runs), bool(band_only))
    return _memo.get(key, lambda: _banked(public, eps, qs, k, n_candidates, runs, band_only))


def _banked(public: GroupScales, eps: np.ndarray, qs: Sequence[float], k: int,
            n_candidates: Any, runs: int, band_only: bool) -> Errors:
    """``expected_quantile_error`` of the noisy CDF (same inputs and outputs) from the
    noise bank: (E|error| per level, mean and median relative error %) per group.

    ``band_only``: only the levels the band holds (``spread.band_levels``) are computed,
    the others are NaN (planning reads no other)."""
    eps2, live, cs, outs = error_grid(eps, public.groups, n_candidates, len(qs))
    err, rel_mean, rel_median = outs
    kk = eps2.shape[1]
    held = band_levels(qs)
    for c in np.unique(cs):
        rows = np.flatnonzero(live.any(axis=1) & (cs == c))
        if rows.size == 0:
            continue
        proxy, truth = _proxy(public.take(rows), int(c), qs)
        z_prefix, z_total = noise_bank(int(c) + 1, runs)
        levels = qm.TreeShape(int(c) + 1, qm.default_branching(int(c) + 1)).levels
        step = (public.upper - public.lower) / (c - 1)
        cum = np.cumsum(proxy, axis=1).astype(np.float32)
        zp, zt = z_prefix.astype(np.float32), z_total.astype(np.float32)
        chunk = max(1, CHUNK_ELEMENTS // (kk * runs * int(c)))
        for start in range(0, rows.size, chunk):
            sl = slice(start, start + chunk)
            idx = rows[sl]
            ok = live[idx]                                                  # (G, K)
            t = effective_scale(k * levels / np.where(ok, eps2[idx], 1.0)).astype(np.float32)
            pre = cum[sl, None, None, 1:] + t[:, :, None, None] * zp[None, None]
            tot = cum[sl, None, None, -1] + t[:, :, None] * zt[None, None]
            asked = [q if (held[j] or not band_only) else np.nan for j, q in enumerate(qs)]
            got = _invert(pre, tot, asked)                                  # (G, K, runs, m)
            est = np.minimum(public.lower + got * step + step / 2, public.upper)
            tr = np.broadcast_to(truth[sl, None, None, :], est.shape)
            e = np.abs(est - tr).mean(axis=2)
            rel = 100.0 * relative_error(est[..., held], tr[..., held])     # (G, K, runs)
            err[idx] = np.where(ok[..., None], e, np.nan)
            rel_mean[idx] = np.where(ok, rel.mean(axis=2), np.nan)
            rel_median[idx] = np.where(ok, np.median(rel, axis=2), np.nan)
    return as_given(eps, outs)
