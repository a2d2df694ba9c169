"""Algorithm 1 of PyDPLib, vectorized: the binary search for ε over a sorted grid.

The unit Laplace noise is drawn once as a (repetitions, n) float32 array and rescaled by
S_f/ε at every probe, so a probe costs a few passes over memory and never a new draw or a
sort. The paper's recursion on ``[low, mid]`` can repeat the same window forever; here the
window shrinks to ``[low, mid-1]`` or ``[mid+1, high]`` at every probe, so the search makes
at most ``floor(log2(len(grid))) + 1`` probes. When no probed ε puts the noise in the band
the search says so (``found=False``) and returns the probed ε whose noise came closest.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import numpy as np

from dp_engine.bands import band as noise_band
from dp_engine.errors import DataTypeError, EmptyDataError, InvalidEpsilonError
from dp_engine.paper.data import normalize_data_type
from dp_engine.paper.fit import fit_rows, inverse_denominators
from dp_engine.paper.types import IN_BAND, TOO_LITTLE, TOO_MUCH, SearchStep
from dp_engine.rng import as_generator

REPETITIONS = 5
_BLOCK_SIZE = 2**18  # up to this many noise values, work on all repetitions at once


def _default_grid() -> np.ndarray:
    """2401 log-spaced ε from 1e-9 to 1e3, rounded to 4 significant digits.

    Neighbours differ by about 1.2 %, far finer than any band (the narrowest spans a factor
    of 2 in noise), and the range covers the per-record ε a mean needs from n = 1 record up
    to about 1e8–1e9 records when the column's span is comparable to its values (that ε
    falls like 1/n because S_f = (b-a)/n). Beyond it the search reports found=False.
    """
    grid = np.geomspace(1e-9, 1e3, 2401)
    digits = 3 - np.floor(np.log10(grid)).astype(int)
    return np.unique([round(float(g), int(d)) for g, d in zip(grid, digits, strict=True)])


DEFAULT_EPSILONS: np.ndarray = _default_grid()
DEFAULT_EPSILONS.setflags(write=False)


def validate_grid(epsilons: object) -> np.ndarray:
    """The ε grid sorted ascending without duplicates; InvalidEpsilonError if any ε <= 0."""
    if epsilons is None:
        return DEFAULT_EPSILONS
    try:
        grid = np.asarray(epsilons, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InvalidEpsilonError("The ε grid must be a list of positive numbers.") from None
    if grid.size == 0:
        raise InvalidEpsilonError("The ε grid is empty; give at least one positive ε.")
    if not np.all(np.isfinite(grid)) or np.any(grid <= 0):
        raise InvalidEpsilonError(
            "Every ε in the grid must be a finite number greater than 0 (ε = 0 or less "
            "would mean infinite noise)."
        )
    if grid.size > 1 and not np.all(grid[1:] > grid[:-1]):
        grid = np.unique(grid)
    return grid


def unit_laplace(rng: np.random.Generator, repetitions: int, n: int) -> np.ndarray:
    """(repetitions, n) float32 Laplace(0, 1) noise: an exponential with a random sign.

    Exactly Laplace distributed and several times faster than ``Generator.laplace``: the
    exponential uses the ziggurat, the signs come 64 to a raw draw and are OR-ed into the
    float32 sign bit (the exponential is never negative). Large inputs go one row at a
    time so the only temporary is n bytes.
    """
    noise = np.empty((repetitions, n), dtype=np.float32)
    top = 3 if sys.byteorder == "little" else 0  # the byte holding the float32 sign bit
    step = max(1, _BLOCK_SIZE // max(n, 1))  # rows per chunk: all of them when n is small
    for first in range(0, repetitions, step):
        block = noise[first : first + step].reshape(-1)
        rng.standard_exponential(dtype=np.float32, out=block)
        raw = rng.bit_generator.random_raw((block.size + 63) // 64)
        signs = np.unpackbits(np.ascontiguousarray(raw).view(np.uint8), count=block.size)
        np.left_shift(signs, 7, out=signs)
        high = block.view(np.uint8)[top::4]
        np.bitwise_or(high, signs, out=high)
    return noise


def search_kind(data_type: object) -> str:
    """float / int / bool / category for a data type spec (None means float)."""
    kind = normalize_data_type(data_type) or "float"
    return "category" if kind in ("str", "char", "category") else kind


class NoiseProbe:
    """Mean noise % over the repetitions at a given noise scale, without new draws.

    Works in float32 (well inside the band tolerances). Integers beyond float32's exact
    range, or values and noise scales that could overflow it (``max_scale`` = S_f / the
    smallest ε), fall back to float64; a noise % that still overflows counts as infinite
    ("too much noise"). Small inputs are processed as one (repetitions, n) block so the
    per-call overhead of numpy does not dominate; large ones one row at a time with a
    single n-sized buffer.
    """

    def __init__(
        self, x: np.ndarray, kind: str, fit: bool, unit: np.ndarray, max_scale: float = 0.0
    ) -> None:
        xmax = max(float(x.max()), -float(x.min()))
        umax = max(float(unit.max()), -float(unit.min()))
        exact_ints = kind in ("int", "category") and xmax >= 2.0**22
        self.dtype = np.float64 if exact_ints or not xmax + max_scale * umax < 1e30 else np.float32
        self.kind = kind
        self.fit = fit and kind != "bool"
        self.unit = unit
        self.min_r = float(x.min())
        self.max_r = float(x.max())
        self.x = x.astype(self.dtype)
        self.invd = inverse_denominators(x, self.dtype)
        shape = unit.shape if unit.size <= _BLOCK_SIZE else (x.size,)
        self.buf = np.empty(shape, dtype=self.dtype)
        self.linear: float | None = None
        if kind == "float" and not fit:
            # No fitting and no rounding: noise % is exactly scale * mean(|u| / d).
            self.linear = self._blocks(lambda buf, block: np.abs(block, out=buf)) / unit.size

    def _blocks(self, fill: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
        """Sum over all repetitions of sum_j fill(u)_j / d_j, block by block."""
        total = 0.0
        blocks = (self.unit,) if self.buf.ndim == 2 else self.unit
        for block in blocks:
            out = fill(self.buf, block)
            if out.ndim == 1:
                total += float(np.dot(out, self.invd))
            else:
                out *= self.invd
                total += float(out.sum(dtype=np.float64))
        return total

    def _fit(self, buf: np.ndarray) -> None:
        """Eq. 4 per row in place (one multiply-add; the overflow-free form if needed)."""
        lo = buf.min(axis=-1, keepdims=True)
        spread = buf.max(axis=-1, keepdims=True)
        spread -= lo
        span = self.max_r - self.min_r
        if float(spread.min()) * 1e30 > span:  # every row spread, and span/spread finite
            a = span / spread
            buf *= a
            lo *= a
            np.subtract(self.min_r, lo, out=lo)
            buf += lo
        else:
            fit_rows(buf, self.min_r, self.max_r, "float")

    def _deviation(self, buf: np.ndarray, block: np.ndarray, scale: np.floating) -> np.ndarray:
        """|fitted(x + scale * u) - x| for a row or block of unit noise, in ``buf``."""
        np.multiply(block, scale, out=buf, casting="same_kind")
        buf += self.x
        if self.kind == "bool":
            np.greater(buf, 0.5, out=buf, casting="unsafe")
        elif self.fit:
            self._fit(buf)
            if self.kind != "float":
                np.rint(buf, out=buf)
        elif self.kind == "int":
            np.rint(buf, out=buf)
        buf -= self.x
        return np.abs(buf, out=buf)

    def percent(self, scale: float) -> float:
        """Noise % averaged over the repetitions at noise scale S_f/ε."""
        if self.linear is not None:
            pct = 100.0 * scale * self.linear
        else:
            s = self.dtype(scale)
            pct = 100.0 * self._blocks(lambda buf, block: self._deviation(buf, block, s))
            pct /= self.unit.size
        return pct if math.isfinite(pct) else math.inf  # overflow: astronomically noisy

    def release(self, x: np.ndarray, scale: float) -> np.ndarray:
        """The released float64 row: x + scale * u[0], fitted / rounded as in ``percent``."""
        row = x + scale * self.unit[0].astype(np.float64)
        if self.kind == "bool" or self.fit:
            return fit_rows(row, self.min_r, self.max_r, self.kind)
        if self.kind == "int":
            np.rint(row, out=row)
        return row


def run_search(
    probe: NoiseProbe, sens: float, band: tuple[float, float], grid: np.ndarray
) -> tuple[int, bool, tuple[SearchStep, ...]]:
    """Binary search over ``grid``; (index chosen, found, steps)."""
    lo_band, hi_band = band
    low, high = 0, grid.size - 1
    steps: list[SearchStep] = []
    while low <= high:
        mid = (low + high) // 2
        eps = float(grid[mid])
        pct = probe.percent(sens / eps)
        if lo_band <= pct <= hi_band:
            steps.append(SearchStep(low, high, mid, eps, pct, IN_BAND))
            return mid, True, tuple(steps)
        if pct < lo_band:  # less noise than wanted: move to smaller ε
            steps.append(SearchStep(low, high, mid, eps, pct, TOO_LITTLE))
            high = mid - 1
        else:
            steps.append(SearchStep(low, high, mid, eps, pct, TOO_MUCH))
            low = mid + 1

    def miss(st: SearchStep) -> tuple[float, float]:
        return (max(lo_band - st.noise_percent, st.noise_percent - hi_band), st.epsilon)

    closest = min(steps, key=miss)  # ties go to the smaller ε (more noise)
    return closest.mid_idx, False, tuple(steps)


def as_numeric(data: object) -> np.ndarray:
    """A finite float64 vector (the search's input: already encoded, no missing values)."""
    try:
        x = np.asarray(data, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise DataTypeError(
            "binary_search_epsilon needs numbers (encode categories first, or call "
            "dp_calculate, which does it)."
        ) from None
    if x.size == 0:
        raise EmptyDataError("There are no values to analyse; choose a non-empty column.")
    if not np.all(np.isfinite(x)):
        raise DataTypeError("Drop missing or infinite values before the ε search.")
    return x


def binary_search_epsilon(
    data: object,
    sensitivity: float,
    noise_factor: int,
    *,
    epsilons: object = None,
    is_range: bool = False,
    data_type: object = None,
    rng: np.random.Generator | None = None,
    repetitions: int = REPETITIONS,
) -> tuple[float, bool, tuple[SearchStep, ...], np.ndarray]:
    """Algorithm 1 on numeric data: (ε, found, steps, noised data at that ε).

    ``data`` is numeric (category codes 0..k-1 for categoricals, which are always fitted);
    the noised data is the first repetition at the chosen ε, fitted to the range when
    ``is_range`` (Eq. 4), rounded for int and category, thresholded at 0.5 for bool.
    """
    x = as_numeric(data)
    band = noise_band(noise_factor)
    grid = validate_grid(epsilons)
    sens = float(sensitivity)
    if not (math.isfinite(sens) and sens >= 0):
        raise DataTypeError(f"The sensitivity must be a finite number >= 0, got {sensitivity!r}.")
    if isinstance(repetitions, bool) or int(repetitions) != repetitions or repetitions < 1:
        raise DataTypeError("repetitions must be a positive whole number.")
    kind = search_kind(data_type)
    gen = as_generator(rng)
    fit = bool(is_range) or kind == "category"
    unit = unit_laplace(gen, int(repetitions), x.size)
    probe = NoiseProbe(x, kind, fit, unit, max_scale=sens / float(grid[0]))
    idx, found, steps = run_search(probe, sens, band, grid)
    eps = float(grid[idx])
    return eps, found, steps, probe.release(x, sens / eps)
