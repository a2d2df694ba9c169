"""Expected error and 95 % half-widths from public inputs only, and the one definition of
relative error (``relative_error``).

Shared by the releases (to label each group) and by ``plan`` (to pick ε before any data is
touched), so the accuracy map and the labels agree. All noise in sound mode is discrete
Laplace on a lattice of step ``grid``: P(k·grid) ∝ exp(−|k|·grid/scale); ``laplace_sum``
gives the mean and quantiles of |Σ Laplace| in closed form.
"""

from __future__ import annotations

import math

import numpy as np


def _dlap_scalar(scale: float, grid: float, level: float | None) -> float:
    """E|noise| (level None) or the ``level`` half-width of one discrete Laplace, in floats."""
    r = grid / scale
    if r > 700 or r != r:
        return 0.0 if r > 700 else math.nan
    if level is None:
        return grid * 2.0 * math.exp(-r) / -math.expm1(-2.0 * r)
    a = math.exp(-r)
    m = math.ceil(math.log((1.0 - level) * (1.0 + a) / 2.0) / -r - 1.0 - 1e-12)
    return grid * max(m, 0)


def _dlap(scale, grid: float, level: float | None):
    arr = np.asarray(scale, dtype=float)
    if arr.size == 1:       # one scale (most calls): plain floats, no array overhead
        value = _dlap_scalar(float(arr.reshape(-1)[0]), grid, level)
        return value if arr.ndim == 0 else np.full(arr.shape, value)
    r = grid / arr
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        a = np.exp(-r)
        if level is None:
            out = grid * 2.0 * a / -np.expm1(-2.0 * r)
        else:
            m = np.ceil(np.log((1.0 - level) * (1.0 + a) / 2.0) / -r - 1.0 - 1e-12)
            out = grid * np.maximum(m, 0.0)
    return np.where(r > 700, 0.0, out)


def dlap_abs_mean(scale, grid: float = 1.0):
    """E|noise| of discrete Laplace: grid · 2a/(1 − a²), a = exp(−grid/scale) (elementwise)."""
    return _dlap(scale, grid, None)


def dlap_half_width(scale, level: float, grid: float = 1.0):
    """Smallest m·grid with P(|noise| ≤ m·grid) ≥ level (elementwise).

    P(|K| > m) = 2a^(m+1)/(1 + a), so m = ⌈log((1 − level)(1 + a)/2)/log a⌉ − 1.
    """
    return _dlap(scale, grid, level)


def mean_error(
    width: float, sum_scale: float, sum_grid: float, count_scale: float, n: np.ndarray | float
):
    """First-order E|error| of (noisy centred sum)/(noisy count), capped at the width.

    error ≈ (E_sum − (mean − mid)·E_count)/n and |mean − mid| ≤ width/2.
    """
    per_n = dlap_abs_mean(sum_scale, sum_grid) + width / 2 * dlap_abs_mean(count_scale)
    return np.minimum(per_n / np.maximum(n, 1.0), width)


def variance_error(width: float, scales: dict[str, float], grids: dict[str, float], n, level=None):
    """First-order error of S2/N − (S1/N)² over centred values (|x − mid| ≤ h = width/2).

    d var ≈ (dS2 − 2μ dS1 − (S2/N − 2μ²) dN)/N with |μ| ≤ h, |S2/N − 2μ²| ≤ 2h².
    ``level`` None gives the expected error; a level gives the half-width with
    a union bound over the three noises (each at 1 − (1 − level)/3).
    """
    h = width / 2.0
    if level is None:

        def size(name: str) -> float:
            return dlap_abs_mean(scales[name], grids[name])
    else:
        each = 1.0 - (1.0 - level) / 3.0

        def size(name: str) -> float:
            return dlap_half_width(scales[name], each, grids[name])

    per_n = size("sumsq") + 2.0 * h * size("sum") + 2.0 * h * h * size("count")
    return np.minimum(per_n / np.maximum(n, 1.0), h * h)


# ---------------------------------------------------------------- one definition of error
#
# For a group's statistic with cells v_1..v_m (m bins of a histogram, m levels of a box plot,
# m = 1 for a count, mean or variance) and a release e_1..e_m:
#   absolute error = mean_i |e_i − v_i|   (records; the column's unit; unit² for a variance)
#   relative error = Σ_i |e_i − v_i| / Σ_i |v_i| = absolute error / scale, where
#   scale = mean_i |v_i| (the mean cell count n_g/bins of a histogram, |value| otherwise).
# The band, the stated expected error and 95 % interval and the owner's realized noise % all
# use it; before the release the scale is a public estimate (DP group size, DP pilot).


def relative_error(estimate, truth) -> np.ndarray:
    """Σ|e − v| / Σ|v| over the last axis (NaN where the truth is all zero or missing)."""
    e = np.asarray(estimate, dtype=float)
    v = np.asarray(truth, dtype=float)
    num = np.sum(np.abs(e - v), axis=-1)
    den = np.sum(np.abs(v), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _scales_matrix(scales) -> np.ndarray:
    """Laplace scales as (..., terms), sorted and pulled apart for the partial fractions.

    A zero scale becomes 1e-6 of the largest (it then weighs nothing); each scale is lifted
    to at least 1.02 times the one before (a slightly wider law: errs on the safe side).
    """
    a = np.abs(np.stack([np.asarray(s, dtype=float) for s in scales], axis=-1))
    top = np.max(a, axis=-1, keepdims=True)
    a = np.sort(np.maximum(a, top * 1e-6), axis=-1)
    for j in range(1, a.shape[-1]):
        a[..., j] = np.maximum(a[..., j], a[..., j - 1] * 1.02)
    return a


def _weights(a: np.ndarray) -> np.ndarray:
    """c_i = Π_(j≠i) a_i²/(a_i² − a_j²): P(|Σ L_i| > x) = Σ_i c_i·exp(−x/a_i)."""
    sq = a**2
    c = np.ones_like(a)
    for i in range(a.shape[-1]):
        for j in range(a.shape[-1]):
            if i != j:
                c[..., i] *= sq[..., i] / (sq[..., i] - sq[..., j])
    return c


def laplace_sum(scales, level: float | None = None):
    """E|X| (level None) or the ``level`` quantile of |X| for X = Σ_i Laplace(scales_i).

    Closed form from the partial fractions of Π 1/(1 + a_i²θ²) (continuous Laplace; discrete
    Laplace noise of the same scale is a little tighter, so this errs on the safe side).
    Broadcasts over leading axes; a term of scale 0 contributes nothing. The quantile lies
    between that of the largest term alone (Anderson's inequality) and Σ_i a_i·log(m/tail)
    (union bound), and is found by bisection in log scale between them.
    """
    if len(scales) == 1:
        a1 = np.abs(np.asarray(scales[0], dtype=float))
        return a1 if level is None else a1 * math.log(1.0 / (1.0 - level))
    if all(np.size(x) == 1 for x in scales):       # one set of scales: plain floats
        value = _laplace_sum_scalar([abs(float(np.ravel(x)[0])) for x in scales], level)
        shape = np.broadcast_shapes(*(np.shape(x) for x in scales))
        return value if shape == () else np.full(shape, value)
    a = _scales_matrix(scales)
    live = a[..., -1] > 0
    a = np.where(live[..., None], a, np.arange(1.0, a.shape[-1] + 1.0))
    c = _weights(a) * live[..., None]
    if level is None:
        return np.sum(c * a, axis=-1)
    tail = 1.0 - level
    lo = np.log(a[..., -1] * math.log(1.0 / tail))
    hi = np.log(np.sum(a, axis=-1) * math.log(a.shape[-1] / tail)) + 1e-9
    for _ in range(36):
        mid = 0.5 * (lo + hi)
        p = np.sum(c * np.exp(-np.exp(mid)[..., None] / a), axis=-1)
        above = p > tail
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return np.where(live, np.exp(hi), 0.0)


def _laplace_sum_scalar(a: list[float], level: float | None) -> float:
    """``laplace_sum`` for one set of scales, in plain floats (no array overhead)."""
    top = max(a)
    if top <= 0:
        return 0.0
    a = sorted(max(x, top * 1e-6) for x in a)
    for j in range(1, len(a)):
        a[j] = max(a[j], a[j - 1] * 1.02)
    c = []
    for i, ai in enumerate(a):
        w = 1.0
        for j, aj in enumerate(a):
            if i != j:
                w *= ai * ai / (ai * ai - aj * aj)
        c.append(w)
    if level is None:
        return sum(ci * ai for ci, ai in zip(c, a, strict=True))
    tail = 1.0 - level
    lo = a[-1] * math.log(1.0 / tail)                 # the largest term alone (a lower bound)
    hi = sum(a) * math.log(len(a) / tail)             # the union bound (an upper bound)
    x = lo
    for _ in range(60):         # Newton from below on log P(|X| > x) − log tail, bracketed
        terms = [ci * math.exp(-x / ai) for ci, ai in zip(c, a, strict=True)]
        p = sum(terms)
        if p <= tail:
            hi = x
        else:
            lo = x
        if hi - lo <= 1e-10 * hi:
            break
        slope = sum(t / ai for t, ai in zip(terms, a, strict=True))
        step = (math.log(p) - math.log(tail)) * p / slope if p > 0 and slope > 0 else 0.0
        x = x + step if lo < x + step < hi else 0.5 * (lo + hi)
    return hi
