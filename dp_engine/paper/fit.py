"""Paper mode arithmetic: data range, fit-to-range (Eq. 4), noise %, sensitivity, effective ε.

Noise % (the quantity Algorithm 1 steers into a band) is the mean over records of
``|x' - x| / d`` in percent, with ``d = |x|``. For a record whose true value is 0 the ratio
is undefined, so ``d`` is the column's true range ``max - min`` instead: a count of 0 noised
to 3 on a column spanning 0–30 is 10 % noise, and a boolean flipped either way is 100 %,
so the noise % of a boolean column is its flip rate. Excluding zero records instead would
make an all-zero or mostly-False column unsteerable. If the range is also 0 (every value
is 0), ``d = 1`` and the noise is measured in the column's own units.
"""

from __future__ import annotations

import math

import numpy as np

from dp_engine.errors import DataTypeError, InvalidBoundsError, InvalidEpsilonError
from dp_engine.paper.data import normalize_data_type, prepare
from dp_engine.paper.types import query_code


def data_range(data: object) -> np.ndarray:
    """The unique valid values of the (un-noised) input, sorted: the paper's ``range_values``.

    Missing values are ignored; text values come back as their sorted unique labels.
    """
    prep = prepare(data)
    if prep.kind == "category":
        assert prep.labels is not None
        return prep.labels.copy()
    uniq = np.unique(prep.values)
    if prep.kind == "bool":
        return uniq.astype(bool)
    return uniq.astype(np.int64) if prep.kind == "int" else uniq


def fit_rows(noised: np.ndarray, min_r: float, max_r: float, kind: str) -> np.ndarray:
    """Eq. 4 along the last axis, in place on a float array, then the type's rounding.

    Each row (one repetition) is mapped affinely so its noised minimum and maximum land on
    ``min_r`` and ``max_r``. A row with no spread (one record, or zero noise on a constant
    column) is clipped to the range instead of dividing by zero; a constant range maps
    every value to that constant. ints and category codes are rounded; bools use > 0.5.
    """
    if kind == "bool":
        np.greater(noised, 0.5, out=noised, casting="unsafe")
        return noised
    lo = noised.min(axis=-1, keepdims=True)
    spread = noised.max(axis=-1, keepdims=True) - lo
    flat = spread <= 0
    if np.any(flat):
        rows = flat[..., 0]
        if noised.ndim == 1:
            np.clip(noised, min_r, max_r, out=noised)
        else:
            noised[rows] = np.clip(noised[rows], min_r, max_r)
    # (x' - min) / spread lies in [0, 1] and cannot overflow, even for a denormal spread.
    noised -= np.where(flat, 0.0, lo).astype(noised.dtype, copy=False)
    noised /= np.where(flat, 1.0, spread).astype(noised.dtype, copy=False)
    noised *= np.where(flat, 1.0, max_r - min_r).astype(noised.dtype, copy=False)
    noised += np.where(flat, 0.0, min_r).astype(noised.dtype, copy=False)
    if kind in ("int", "category"):
        np.rint(noised, out=noised)
    # Guard against rounding pushing a value a hair outside the range.
    np.clip(noised, min_r, max_r, out=noised)
    return noised


def fit_data_to_range(
    data: object, range_values: object, data_type: object = "float"
) -> np.ndarray:
    """Eq. 4: fit noised values back into the range of the valid values (see ``fit_rows``).

    ``data_type`` float keeps Eq. 4's continuous output; int rounds it; bool returns
    ``data > 0.5``; char/str/category snaps each value to the nearest valid value. When the
    range values are labels (text), ``data`` holds noised codes into the sorted labels and
    the labels are returned.
    """
    noised = np.array(data, dtype=np.float64, ndmin=1)
    if noised.ndim != 1 or noised.size == 0:
        raise DataTypeError("fit_data_to_range needs a non-empty one-dimensional array.")
    if not np.all(np.isfinite(noised)):
        raise DataTypeError("Noised values must be finite numbers.")
    kind = normalize_data_type(data_type) or "float"
    kind = "category" if kind in ("str", "char", "category") else kind
    values = np.asarray(range_values)
    if values.size == 0:
        raise DataTypeError("range_values is empty: derive it from the data with data_range.")
    if kind == "bool":
        return noised > 0.5
    if values.dtype.kind in "USO":
        labels = np.asarray(sorted(set(values.tolist())), dtype=object)
        codes = fit_rows(noised, 0.0, labels.size - 1.0, "category").astype(np.intp)
        return labels[codes]
    points = np.unique(values.astype(np.float64))
    fitted = fit_rows(
        noised, float(points[0]), float(points[-1]), kind.replace("category", "float")
    )
    if kind == "category":
        return _snap(fitted, points).astype(values.dtype)
    return fitted.astype(np.int64) if kind == "int" else fitted


def _snap(x: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Each value replaced by the nearest of the sorted ``points`` (ties go down)."""
    right = np.clip(np.searchsorted(points, x), 1, points.size - 1) if points.size > 1 else None
    if right is None:
        return np.full_like(x, points[0])
    left = right - 1
    return np.where(x - points[left] <= points[right] - x, points[left], points[right])


_MIN_DENOMINATOR = 1e-30


def inverse_denominators(true: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """1/d per record for the noise % (d = |x|, or the column range where x is 0).

    Computed in ``dtype`` with one n-sized array (the search uses float32).
    """
    span = float(true.max() - true.min())
    zero_d = span if span > 0 else 1.0
    d = np.empty(true.shape, dtype=dtype)
    np.abs(true, out=d, casting="same_kind")
    d[d == 0] = zero_d
    # Floor so a denormal value cannot overflow 1/d (its relative noise is astronomical anyway).
    np.maximum(d, _MIN_DENOMINATOR, out=d)
    return np.reciprocal(d, out=d)


def noise_percent(true: object, noised: object) -> float:
    """Mean relative noise in percent of ``noised`` against ``true`` (module docstring).

    Text labels are compared through their codes in the sorted labels of ``true``.
    """
    t = np.asarray(true)
    z = np.asarray(noised)
    if t.shape != z.shape or t.ndim != 1 or t.size == 0:
        raise DataTypeError("noise_percent needs two non-empty columns of the same length.")
    if t.dtype.kind in "USO" or z.dtype.kind in "USO":
        labels = np.asarray(sorted(set(t.tolist())), dtype=object)
        index = {lab: i for i, lab in enumerate(labels.tolist())}
        try:
            t = np.array([index[v] for v in t.tolist()], dtype=np.float64)
            z = np.array([index[v] for v in z.tolist()], dtype=np.float64)
        except KeyError as exc:
            raise DataTypeError(
                f"Noised label {exc.args[0]!r} is not among the true labels."
            ) from None
    t = t.astype(np.float64)
    z = z.astype(np.float64)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(z))):
        raise DataTypeError("noise_percent needs finite values (drop missing records first).")
    diff = np.abs(z - t)
    return float(100.0 * np.dot(diff, inverse_denominators(t)) / t.size)


def check_bounds(bounds: object) -> tuple[float, float]:
    """(a, b) as floats; InvalidBoundsError unless both are finite and a < b."""
    try:
        a, b = (float(v) for v in bounds)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise InvalidBoundsError("Bounds must be a pair (lower, upper) of numbers.") from None
    if not (math.isfinite(a) and math.isfinite(b)) or a >= b:
        raise InvalidBoundsError(
            f"Bounds ({a}, {b}) are invalid: the lower bound must be a finite number "
            "strictly below the upper bound."
        )
    return a, b


def sensitivity_from(code: int, span: float, n: int) -> float:
    """S_f for a query code, value span b - a and record count n (Eq. 5–7; count is 1)."""
    if code == 1:
        return 1.0
    if code == 4:
        return span * span / n
    return span / n


def sensitivity(query_type: object, data: object, bounds: object = None) -> float:
    """S_f of the paper: count 1, mean and median (b - a)/n, variance (b - a)^2/n.

    Without ``bounds`` a and b are the data's own minimum and maximum (data-derived, as in
    the paper); n is the number of non-missing values. Category codes span k - 1.
    """
    code = query_code(query_type)
    prep = prepare(data)
    if code in (2, 4) and prep.kind == "category":
        raise DataTypeError(
            f"A {('mean', 'variance')[code == 4]} needs numbers, but these values are text."
        )
    if bounds is None:
        span = float(prep.values.max() - prep.values.min())
    else:
        a, b = check_bounds(bounds)
        span = b - a
    return sensitivity_from(code, span, prep.n)


# The loss depends on the noise scale (the query) and on how far one patient moves one
# record; only for query 1 does that depend on what the records are (counts or values).
_RECORD_STATISTICS = ("mean", "median", "variance", "values")
_STATISTICS = {
    1: ("count", "histogram"),
    2: _RECORD_STATISTICS,
    3: _RECORD_STATISTICS,
    4: _RECORD_STATISTICS,
}


def effective_epsilon(
    query_type: object,
    epsilon: float,
    n: int,
    *,
    statistic: str | None = None,
    span: float | None = None,
) -> float:
    """The ε the released values really carry under per-record noise Lap(S_f/ε).

    One patient can move one record by Δ, so the noised vector (and by post-processing any
    statistic of it) loses at most Δ/(S_f/ε); the mean attains it (the tail of a sum of
    Laplace noises decays like a single Laplace), so for the mean it is exact:

    - mean / median (S_f = (b-a)/n, Δ = b-a): n·ε;
    - variance (S_f = (b-a)²/n, Δ = b-a): n·ε/(b-a), so ``span`` = b-a is required;
    - count (statistic "count", the default: the data are per-cell counts, one patient
      moves one cell by 1): ε; statistic "histogram" (raw values noised with S_f = 1 then
      binned): (b-a)·ε, ``span`` required.

    For queries 2–4 ``statistic`` (mean, median, variance or values) does not change the
    bound: the whole noised vector carries it.

    This is for neighbours that replace one record, with the bounds treated as public. It
    is still a LOWER bound on the true loss: the ε search reads the data to pick ε, the
    range (min, max, categories) is derived from the data, and the output reveals n
    exactly, so under add/remove neighbours the loss is unbounded.
    """
    code = query_code(query_type)
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise InvalidEpsilonError(f"ε must be a positive number, got {epsilon!r}.") from None
    if not (math.isfinite(eps) and eps > 0):
        raise InvalidEpsilonError(f"ε must be a finite positive number, got {epsilon!r}.")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise DataTypeError(f"n must be a positive whole number of records, got {n!r}.")
    stat = statistic or _STATISTICS[code][0]
    if stat not in _STATISTICS[code]:
        raise DataTypeError(
            f"Statistic {stat!r} does not fit query {code}; use one of {_STATISTICS[code]}."
        )
    if code in (2, 3):
        return float(n) * eps
    if code == 1 and stat == "count":
        return eps
    if span is None:
        raise InvalidBoundsError(
            "This statistic's privacy loss depends on the value range: pass span = b - a."
        )
    s = float(span)
    if not (math.isfinite(s) and s >= 0):
        raise InvalidBoundsError(f"span must be a finite non-negative number, got {span!r}.")
    if code == 1:
        return s * eps
    return math.inf if s == 0 else float(n) * eps / s
