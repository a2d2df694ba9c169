"""Input checks shared by the sound-mode mechanisms and statistics.

Every check raises a ``DPError`` subclass with a message a dashboard user can act
on. Missing values (NaN, None, pd.NA) are dropped before any DP computation: a
missing record is treated as a record that is not in the data set, which is safe
under add/remove-one neighbours. How many were dropped is data-dependent, so it
is never reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dp_engine.errors import (
    DataTypeError,
    EmptyDataError,
    InvalidBoundsError,
    InvalidEpsilonError,
    UnknownCategoryError,
    UnknownQueryError,
)

_NUMERIC_KINDS = "biuf"
_NUMERIC_INFERRED = {"integer", "floating", "mixed-integer-float", "boolean", "decimal", "empty"}


def check_epsilon(epsilon: Any, name: str = "ε") -> float:
    """A finite ε > 0 as a float; InvalidEpsilonError otherwise."""
    try:
        value = float(epsilon)
        if isinstance(epsilon, (str, bytes)):
            raise TypeError
    except (TypeError, ValueError):
        raise InvalidEpsilonError(
            f"The privacy parameter {name} must be a number, got {epsilon!r}."
        ) from None
    if not math.isfinite(value) or value <= 0:
        raise InvalidEpsilonError(
            f"The privacy parameter {name} must be a finite number greater than 0 "
            f"(got {epsilon!r}); a typical value is between 0.1 and 2."
        )
    return value


def check_bounds(lower: Any, upper: Any) -> tuple[float, float]:
    """Finite public bounds with lower < upper; InvalidBoundsError otherwise."""
    try:
        lo, hi = float(lower), float(upper)
    except (TypeError, ValueError):
        raise InvalidBoundsError(
            f"The bounds must be numbers (got lower={lower!r}, upper={upper!r}); "
            "set them in the dataset schema."
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidBoundsError(
            f"The bounds must be finite (got lower={lower!r}, upper={upper!r}); "
            "set a public range for this column in the dataset schema."
        )
    if max(abs(lo), abs(hi)) > 1e150:
        raise InvalidBoundsError(
            f"The bounds are too large (got lower={lo:g}, upper={hi:g}); change the unit."
        )
    if lo >= hi:
        raise InvalidBoundsError(
            f"The lower bound must be smaller than the upper bound (got {lo:g} ≥ {hi:g})."
        )
    return lo, hi


def check_sensitivity(sensitivity: Any) -> float:
    """A finite sensitivity > 0; InvalidBoundsError otherwise."""
    try:
        value = float(sensitivity)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InvalidBoundsError(
            f"The sensitivity must be a finite number greater than 0 (got {sensitivity!r}): "
            "it is the most one patient can change the answer."
        )
    return value


def _numeric_array(values: Any, what: str) -> np.ndarray:
    """values as a float64 array (any shape) with missing as NaN; DataTypeError if not numeric."""
    if isinstance(values, (pd.Series, pd.Index, pd.api.extensions.ExtensionArray)):
        dtype = values.dtype
        if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
            raise DataTypeError(
                f"{what} must be numeric, but the column has type {dtype}; "
                "use a count or a histogram for categorical columns."
            )
        return np.asarray(pd.Series(values).to_numpy(dtype=float, na_value=np.nan))
    arr = np.asarray(values)
    if arr.dtype.kind in _NUMERIC_KINDS:
        return arr if arr.dtype == np.float64 else arr.astype(np.float64)
    if arr.dtype.kind == "O":
        flat = arr.ravel()
        if pd.api.types.infer_dtype(flat, skipna=True) in _NUMERIC_INFERRED:
            out = pd.to_numeric(pd.Series(flat), errors="coerce").to_numpy(dtype=float)
            return out.reshape(arr.shape)
    raise DataTypeError(
        f"{what} must be numeric (got values of type {arr.dtype}); "
        "use a count or a histogram for text or categorical columns."
    )


def finite_array(value: Any, what: str = "The value") -> np.ndarray:
    """Numeric value(s) to perturb, as float64, all finite (a mechanism cannot drop entries)."""
    arr = np.atleast_1d(_numeric_array(value, what))
    if arr.size == 0:
        raise EmptyDataError(f"{what} is empty: there is nothing to add noise to.")
    if not (math.isfinite(arr.min()) and math.isfinite(arr.max())):  # no n-sized temporary
        raise DataTypeError(
            f"{what} contains missing or infinite entries; remove them before adding noise."
        )
    return arr


def category_codes(values: Any, categories: Sequence[Any], what: str = "The values") -> np.ndarray:
    """Codes of ``values`` in the public ``categories``, −1 where a value is missing.

    A non-missing value outside the list raises UnknownCategoryError naming a few
    of the offending values.
    """
    index = public_index(categories)
    series = values if isinstance(values, pd.Series) else pd.Series(np.ravel(np.asarray(values)))
    raw = series.to_numpy()
    codes = index.get_indexer(raw)
    bad = codes < 0
    if bad.any():
        bad &= ~series.isna().to_numpy()
        if bad.any():
            examples = ", ".join(repr(v) for v in pd.unique(raw[bad])[:3])
            raise UnknownCategoryError(
                f"{what} include {examples}, not in the public category list "
                f"{list(index)[:10]}; add it to the dataset schema or fix the data."
            )
    return codes.astype(np.intp, copy=False)


def public_index(categories: Sequence[Any]) -> pd.Index:
    """The public category list as a unique, non-empty pandas Index."""
    if isinstance(categories, (str, bytes)) or np.ndim(categories) != 1:
        raise DataTypeError(
            f"A category list must be a sequence of categories (got {categories!r})."
        )
    index = pd.Index(list(categories))
    if len(index) == 0:
        raise UnknownCategoryError("The public category list is empty; define it in the schema.")
    if not index.is_unique:
        raise UnknownCategoryError(
            f"The public category list has duplicates: {list(index[index.duplicated()])}."
        )
    return index


def check_same_length(values: np.ndarray | pd.Series, groups: Any) -> None:
    """Values and group labels must pair one-to-one."""
    if len(values) != len(groups):
        raise DataTypeError(
            f"Values and group labels must have the same length "
            f"(got {len(values)} values and {len(groups)} group labels)."
        )


def check_qs(qs: Any) -> tuple[float, ...]:
    """Quantile levels strictly inside (0, 1)."""
    try:
        levels = tuple(float(q) for q in np.ravel(qs))
    except (TypeError, ValueError):
        raise UnknownQueryError(
            f"Quantile levels must be numbers between 0 and 1 (got {qs!r})."
        ) from None
    if not levels or not all(0.0 < q < 1.0 for q in levels):
        raise UnknownQueryError(f"Quantile levels must be strictly between 0 and 1 (got {qs!r}).")
    return levels
