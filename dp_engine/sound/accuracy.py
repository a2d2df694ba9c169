"""Expected error and 95 % half-widths from public inputs only.

Shared by the statistics (to label each release) and by ``calibrate`` (to pick
ε before any data is touched), so the accuracy map and the labels agree.
All noise in sound mode is discrete Laplace on a lattice of step ``grid``:
P(k·grid) ∝ exp(−|k|·grid/scale).
"""

from __future__ import annotations

import math

import numpy as np


def dlap_abs_mean(scale: float, grid: float = 1.0) -> float:
    """E|noise| of discrete Laplace: grid · 2a/(1 − a²), a = exp(−grid/scale)."""
    r = grid / scale
    if r > 700:
        return 0.0
    a = math.exp(-r)
    return grid * 2.0 * a / -math.expm1(-2.0 * r)


def dlap_half_width(scale: float, level: float, grid: float = 1.0) -> float:
    """Smallest m·grid with P(|noise| ≤ m·grid) ≥ level.

    P(|K| > m) = 2a^(m+1)/(1 + a), so m = ⌈log((1 − level)(1 + a)/2)/log a⌉ − 1.
    """
    r = grid / scale
    if r > 700:
        return 0.0
    a = math.exp(-r)
    m = math.ceil(math.log((1.0 - level) * (1.0 + a) / 2.0) / -r - 1.0 - 1e-12)
    return grid * max(m, 0)


def mean_error(
    width: float, sum_scale: float, sum_grid: float, count_scale: float, n: np.ndarray | float
):
    """First-order E|error| of (noisy centred sum)/(noisy count), capped at the width.

    error ≈ (E_sum − (mean − mid)·E_count)/n and |mean − mid| ≤ width/2.
    """
    per_n = dlap_abs_mean(sum_scale, sum_grid) + width / 2 * dlap_abs_mean(count_scale)
    return np.minimum(per_n / np.maximum(n, 1.0), width)


def mean_half_width(
    width: float, sum_scale: float, sum_grid: float, count_scale: float, n: np.ndarray | float
):
    """95 % half-width for the mean (union bound over the two noises, 97.5 % each)."""
    per_n = dlap_half_width(sum_scale, 0.975, sum_grid) + width / 2 * dlap_half_width(
        count_scale, 0.975
    )
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


def quantile_error(
    width: float, n_candidates: int, epsilon_q: float, sensitivity: float, n, level=None
):
    """Error of an exponential-mechanism quantile under a uniform-data model.

    Public inputs cannot say where the data sit, so we assume n values spread
    evenly over [lower, upper] (gap g = width/n). The mechanism then picks a rank
    error with density ∝ exp(−ε_q|r|/(2Δ)), i.e. a value error ≈ Laplace(s) with
    s = 2Δ·g/ε_q, plus the spread inside one data gap and the grid step h:
    expected ≈ s + g/4 + h/4; half-width = s·log(1/(1 − level)) + g + h/2.
    Capped at width/2; NaN when n is unknown.
    """
    n = np.asarray(np.nan if n is None else n, dtype=float)
    gap = width / np.maximum(n, 1.0)
    step = width / (n_candidates - 1)
    scale = 2.0 * np.asarray(sensitivity) * gap / epsilon_q
    if level is None:
        err = scale + gap / 4.0 + step / 4.0
    else:
        err = scale * math.log(1.0 / (1.0 - level)) + gap + step / 2.0
    return np.where(np.isnan(n), np.nan, np.minimum(err, width / 2.0))
