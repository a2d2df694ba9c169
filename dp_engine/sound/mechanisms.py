"""Noise mechanisms usable on their own (central DP, vectorized).

* ``laplace`` is floating-point safe (Mironov 2012): the input is snapped to a
  power-of-two lattice and integer (discrete-Laplace) noise is added on that
  lattice, so every output is an exact lattice point and no output "hole" reveals
  the input. The rounding can move a value by up to half a lattice step, so the
  scale is raised from Δ/ε to (Δ + m·Λ)/ε (m = number of elements, Λ = step).
  The integer noise K = ⌊tE₁⌋ − ⌊tE₂⌋ (E₁, E₂ standard exponential) is exact: each
  floor is geometric with P(G ≥ g) = e^(−g/t), and their difference has
  P(K = k) ∝ e^(−|k|/t) (up to the 53-bit resolution of the draws).
* ``bounded_laplace`` follows Holohan et al. (2018): output restricted to
  [lower, upper] by inverse-CDF sampling, scale raised so the truncation keeps ε-DP.
* ``randomized_response`` (binary or k-ary) and ``exponential`` (Gumbel-max).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dp_engine.errors import DataTypeError, InvalidBoundsError
from dp_engine.rng import RngLike, as_generator
from dp_engine.sound.validation import (
    category_codes,
    check_bounds,
    check_epsilon,
    check_sensitivity,
    finite_array,
    public_index,
)

CHUNK = 1 << 16  # elements per block: work buffers stay in cache, no n-sized temporaries
GRID_BITS = 12  # the lattice step is at most 2^-12 of the noise scale per element
_EXACT = 2.0**52  # lattice coordinates must stay below this to be exact in float64


def _shaped(out: np.ndarray, like: Any) -> np.ndarray | float:
    """A Python float for scalar input, the array otherwise."""
    return float(out.reshape(-1)[0]) if np.ndim(like) == 0 else out


def dlap_noise(t: float, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Integer-valued float64 discrete-Laplace noise, P(k) ∝ exp(−|k|/t)."""
    noise = rng.standard_exponential(size)
    other = rng.standard_exponential(size)
    noise *= t
    other *= t
    np.floor(noise, out=noise)
    np.floor(other, out=other)
    noise -= other
    return noise


def lattice_step(scale: float, elements: int = 1) -> float:
    """The power-of-two lattice step for noise of ``scale`` on ``elements`` values."""
    return 2.0 ** math.floor(math.log2(scale / (2.0**GRID_BITS * max(elements, 1))))


def laplace_step(sensitivity: float, epsilon: float, changed: int = 1) -> float:
    """Lattice step of ``laplace``: a power of two ≤ min(Δ, Δ/ε)/(2^12 · changed).

    Then the scale (Δ + changed·Λ)/ε is at most (1 + 2^-12)·Δ/ε, and the noise has
    at least 2^12 lattice points per scale.
    """
    return lattice_step(min(sensitivity, sensitivity / epsilon), changed)


def lattice_laplace(
    x: np.ndarray, sensitivity: float, epsilon: float, rng: np.random.Generator, changed: int
) -> tuple[np.ndarray, float, float]:
    """Snap ``x`` to a lattice and add discrete-Laplace noise on it.

    ``changed`` is how many elements one record can move. Returns (noisy values,
    lattice step Λ, scale b in value units) with b = (Δ + changed·Λ)/ε. Works in
    cache-sized blocks, so the output is the only n-sized allocation.
    """
    step = laplace_step(sensitivity, epsilon, changed)
    scale = (sensitivity + changed * step) / epsilon
    inv = 1.0 / step  # exact: step is a power of two
    flat = x.reshape(-1)
    largest = max(float(flat.max()), -float(flat.min())) if flat.size else 0.0
    if largest * inv + 50.0 * scale * inv >= _EXACT:
        raise DataTypeError(
            "The values are too large compared with the sensitivity to be perturbed exactly; "
            "rescale them (e.g. change the unit) or use a larger sensitivity."
        )
    t = scale * inv
    out = np.empty(flat.size)
    first, second = np.empty(min(flat.size, CHUNK)), np.empty(min(flat.size, CHUNK))
    for start in range(0, flat.size, CHUNK):
        block = out[start : start + CHUNK]
        e1, e2 = first[: block.size], second[: block.size]
        _dlap_into(block, t, rng, e1, e2)
        np.multiply(flat[start : start + CHUNK], inv, out=e1)
        np.rint(e1, out=e1)
        block += e1
        block *= step
    return out.reshape(x.shape), step, scale


def _dlap_into(
    out: np.ndarray, t: float, rng: np.random.Generator, e1: np.ndarray, e2: np.ndarray
) -> None:
    """out ← ⌊t·E1⌋ − ⌊t·E2⌋ using the scratch buffers e1, e2 (same length as out)."""
    rng.standard_exponential(out=e1)
    rng.standard_exponential(out=e2)
    e1 *= t
    e2 *= t
    np.floor(e1, out=e1)
    np.floor(e2, out=e2)
    np.subtract(e1, e2, out=out)


def laplace(
    value: Any, sensitivity: float, epsilon: float, *, changed: int = 1, rng: RngLike = None
):
    """Floating-point-safe Laplace mechanism, noise of scale ≈ Δ/ε on every element.

    ε-DP when one record moves at most ``changed`` elements of ``value`` by a total
    (L1) of Δ: the default 1 covers a scalar query, per-record noising and disjoint
    cells. For a vector query where one record can move every element, pass
    ``changed=value.size``. Snapping to the lattice raises the scale to
    (Δ + changed·Λ)/ε ≤ (1 + 2^-12)·Δ/ε. Returns a float for scalar input.
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = check_sensitivity(sensitivity)
    if int(changed) != changed or changed < 1:
        raise DataTypeError(f"changed must be a whole number ≥ 1 (got {changed!r}).")
    x = finite_array(value)
    out, _, _ = lattice_laplace(x, sensitivity, epsilon, as_generator(rng), int(changed))
    return _shaped(out, value)


def _log_c(x: float, lower: float, upper: float, scale: float) -> float:
    """log of the Laplace(x, scale) mass inside [lower, upper]."""
    tails = math.exp(-(x - lower) / scale) + math.exp(-(upper - x) / scale)
    return math.log1p(-0.5 * tails)


def _smallest_scale(loss, start: float) -> float:
    """The smallest b ≥ start with loss(b) ≤ 0, for a loss that falls as b grows.

    Doubles from ``start`` (the unbounded Laplace scale, where the loss is still ≥ 0)
    until the loss is met, then bisects to a relative 1e-13; returns the safe end.
    """
    lo, hi = start, 2.0 * start
    while loss(hi) > 0:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if loss(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi


def bounded_laplace_scale(sensitivity: float, epsilon: float, lower: float, upper: float) -> float:
    """Smallest scale b with Δ/b + log ΔC(b) ≤ ε (Holohan et al. 2018, δ = 0).

    ΔC(b) is the largest ratio of truncation masses of two inputs at most Δ apart;
    log C is concave, so it is C(min(lower + Δ, mid)) / C(lower).
    """
    width = upper - lower
    shift = min(sensitivity, width / 2.0)

    def loss(b: float) -> float:
        log_ratio = _log_c(lower + shift, lower, upper, b) - _log_c(lower, lower, upper, b)
        return min(sensitivity, width) / b + log_ratio - epsilon

    return _smallest_scale(loss, min(sensitivity, width) / epsilon)


def _log_mass(c: np.ndarray | float, span: int, r: float):
    """log Σ_{y=0..span} a^|y − c| for a lattice centre c in [0, span], a = e^(−r)."""
    c = np.asarray(c, dtype=float)
    inner = -np.expm1(-r * (c + 1.0)) - math.exp(-r) * np.expm1(-r * (span - c))
    return np.log(inner) - math.log(-math.expm1(-r))


def bounded_laplace_plan(
    sensitivity: float, epsilon: float, lower: float, upper: float
) -> tuple[float, float, int, int]:
    """(lattice step Λ, scale b, first and last lattice index in [lower, upper]).

    The output is discrete Laplace on the lattice Λℤ restricted to the bounds
    (the lattice form of Holohan et al. 2018). Snapped inputs move by at most
    m = ⌊Δ/Λ⌋ + 1 steps, so the privacy loss is m·Λ/b + log(Z(c')/Z(c)) with Z the
    truncated mass; log Z is concave in the centre, so its worst ratio is between
    the lower end and the point m steps (or half the span) away. b is the smallest
    scale with loss ≤ ε, found by bisection.
    """
    width = upper - lower
    step = lattice_step(min(bounded_laplace_scale(sensitivity, epsilon, lower, upper), width))
    first, last = math.ceil(lower / step), math.floor(upper / step)
    span = last - first
    m = min(math.floor(sensitivity / step) + 1, span)
    worst = min(m, span // 2)

    def loss(b: float) -> float:
        r = step / b
        gap = _log_mass(worst, span, r) - _log_mass(0, span, r)
        return m * r + float(gap) - epsilon

    return step, _smallest_scale(loss, m * step / epsilon), first, last


def bounded_laplace(
    value: Any,
    lower: float,
    upper: float,
    sensitivity: float,
    epsilon: float,
    *,
    rng: RngLike = None,
):
    """ε-DP Laplace noise restricted to [lower, upper] (Holohan et al. 2018), float-safe.

    Inputs are clamped to the bounds and snapped to a power-of-two lattice; the
    output is discrete Laplace on that lattice conditioned on [lower, upper]
    (P(y) ∝ exp(−|y − x|/b)), with b from ``bounded_laplace_plan``: within a
    factor 1 + 2^-11 or so of Holohan's continuous scale. Every output is a lattice
    point, so its low-order bits carry nothing.
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = check_sensitivity(sensitivity)
    lower, upper = check_bounds(lower, upper)
    step, scale, first, last = bounded_laplace_plan(sensitivity, epsilon, lower, upper)
    centre = np.clip(np.rint(finite_array(value) * (1.0 / step)), first, last) - first
    out = truncated_dlap(centre, last - first, step / scale, as_generator(rng))
    out += first
    out *= step
    return _shaped(out, value)


def truncated_dlap(centre: np.ndarray, span: int, r: float, rng: np.random.Generator) -> np.ndarray:
    """Draw y in {0..span} with P(y) ∝ exp(−r|y − centre|), by inversion (one uniform).

    Masses: left A = Σ_{k=1..c} a^k, centre 1, right B = Σ_{k=1..span−c} a^k. Inside a
    side the offset k − 1 is a truncated geometric, inverted in closed form.
    """
    a = math.exp(-r)
    unit = -math.expm1(-r)
    n_left, n_right = centre, span - centre
    mass_l = a * -np.expm1(-r * n_left) / unit
    mass_r = a * -np.expm1(-r * n_right) / unit
    v = rng.random(centre.shape) * (mass_l + 1.0 + mass_r)
    left = v < mass_l
    right = v >= mass_l + 1.0
    w = np.where(
        left, v / np.where(left, mass_l, 1.0), (v - mass_l - 1.0) / np.where(right, mass_r, 1.0)
    )
    w = np.clip(w, 0.0, 1.0)
    side = np.where(left, n_left, n_right)
    g = np.floor(np.log1p(w * np.expm1(-r * side)) / -r)
    g = np.clip(g, 0.0, np.maximum(side - 1.0, 0.0))
    return np.where(left, centre - 1.0 - g, np.where(right, centre + 1.0 + g, centre))


def randomized_response(
    value: Any, categories: Sequence[Any], epsilon: float, *, rng: RngLike = None
):
    """k-ary randomized response: keep the true category w.p. e^ε/(e^ε + k − 1).

    Otherwise report one of the k − 1 other categories uniformly; ε-DP per
    reported value. k = 2 is binary randomized response. Missing values are not
    allowed (they are not a public category).
    """
    epsilon = check_epsilon(epsilon)
    index = public_index(categories)
    k = len(index)
    if k < 2:
        raise InvalidBoundsError("Randomized response needs at least two public categories.")
    codes = category_codes(value if np.ndim(value) else [value], index)
    if (codes < 0).any():
        raise DataTypeError("Randomized response cannot report a missing value; drop it first.")
    gen = as_generator(rng)
    keep_p = 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))
    other = gen.integers(0, k - 1, size=codes.shape)
    other += other >= codes
    out = np.where(gen.random(codes.shape) < keep_p, codes, other)
    reported = np.asarray(index, dtype=object)[out]
    if np.ndim(value) == 0:
        return reported[0]
    return reported.reshape(np.shape(value))


def gumbel_argmax(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Index of the max of logits + Gumbel noise along the last axis: softmax sampling."""
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1)


def exponential(
    candidates: Sequence[Any],
    utilities: Any,
    sensitivity: float,
    epsilon: float,
    *,
    rng: RngLike = None,
):
    """Exponential mechanism: P(c) ∝ exp(ε·u(c) / (2Δ)), sampled by Gumbel-max.

    ``utilities`` may hold −inf (never chosen) but not NaN or +inf.
    """
    epsilon = check_epsilon(epsilon)
    sensitivity = check_sensitivity(sensitivity)
    cands = list(candidates)
    try:
        util = np.asarray(utilities, dtype=float)
    except (TypeError, ValueError):
        raise DataTypeError("Utilities must be numbers, one per candidate.") from None
    if util.ndim != 1 or util.size != len(cands) or not cands:
        raise DataTypeError(
            f"Give one utility per candidate (got {util.size} utilities for "
            f"{len(cands)} candidates)."
        )
    if np.isnan(util).any() or np.isposinf(util).any() or not np.isfinite(util).any():
        raise DataTypeError("Utilities must be finite numbers (−inf marks an excluded candidate).")
    logits = util * (epsilon / (2.0 * sensitivity))
    return cands[int(gumbel_argmax(logits, as_generator(rng)))]
