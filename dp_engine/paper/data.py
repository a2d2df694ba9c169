"""Paper mode input handling: data types, missing values, category codes and output types.

PyDPLib accepts char, string, int, numpy ints, float, numpy floats, bool and numpy.bool_
values; here they come as a list, a numpy array or a pandas Series. Every input is turned
into one float64 vector (categories become codes 0..k-1 in label order) plus what is needed
to give the noised result back in the input's own type.

Missing values (None, NaN, pandas NA) are dropped and counted: the noise is added to the
records that exist, ``n`` in the sensitivity is the number kept, and the result carries
``n_dropped`` and the ``kept`` mask so callers can realign other columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dp_engine.errors import DataTypeError, EmptyDataError, UnknownCategoryError

_TYPE_NAMES: dict[str, str] = {
    "float": "float",
    "double": "float",
    "int": "int",
    "integer": "int",
    "bool": "bool",
    "bool_": "bool",
    "boolean": "bool",
    "str": "str",
    "string": "str",
    "char": "char",
    "category": "category",
    "categorical": "category",
}


def normalize_data_type(data_type: object) -> str | None:
    """Map a data type spec (name, Python/numpy type or dtype) to float/int/bool/str/char."""
    if data_type is None:
        return None
    if isinstance(data_type, str):
        name = data_type.strip().lower()
        for prefix in ("numpy.", "np."):
            name = name.removeprefix(prefix)
        if name in _TYPE_NAMES:
            return _TYPE_NAMES[name]
        if name.startswith(("int", "uint")):
            return "int"
        if name.startswith("float"):
            return "float"
        raise DataTypeError(
            f"Unknown data type {data_type!r}: use char, str, int, float or bool "
            "(numpy variants such as numpy.int64 are accepted too)."
        )
    if isinstance(data_type, type):
        if issubclass(data_type, bool | np.bool_):
            return "bool"
        if issubclass(data_type, int | np.integer):
            return "int"
        if issubclass(data_type, float | np.floating):
            return "float"
        if issubclass(data_type, str | np.str_):
            return "str"
    if isinstance(data_type, np.dtype):
        return normalize_data_type(data_type.type)
    raise DataTypeError(f"Unknown data type {data_type!r}: use char, str, int, float or bool.")


@dataclass(frozen=True)
class Prepared:
    """One input column turned into numbers, with what is needed to map results back."""

    values: np.ndarray  # float64, valid records only (category codes for categoricals)
    kind: str  # float / int / bool / category
    labels: np.ndarray | None  # object array of labels, code i -> labels[i]
    container: str  # "list" or "array" (a pandas Series comes back as an array)
    out_dtype: np.dtype | None  # dtype of the returned array (None for categoricals)
    label_dtype: np.dtype | None  # dtype of the input array of labels (U / O)
    kept: np.ndarray  # bool mask over the input positions
    declared: str  # the data type name as declared or inferred

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def n_dropped(self) -> int:
        return int(self.kept.size - self.values.size)


def _to_object_1d(data: object) -> tuple[np.ndarray, str, np.dtype | None]:
    """(values, container, original dtype or None) for a list, array or Series."""
    if isinstance(data, pd.Series):
        dtype = data.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            return data.to_numpy(), "array", dtype
        return data.to_numpy(dtype=object, na_value=None), "array", None
    if isinstance(data, np.ndarray):
        if data.ndim != 1:
            raise DataTypeError(
                f"Expected one column of values, got an array of shape {data.shape}."
            )
        return data, "array", data.dtype
    if isinstance(data, str | bytes) or not hasattr(data, "__iter__"):
        raise DataTypeError("Expected a list, numpy array or pandas Series of values.")
    items = list(data)  # type: ignore[call-overload]
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr, "list", None


def _missing_mask(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind == "f":
        return np.isnan(arr)
    if arr.dtype.kind == "O":
        return np.asarray(pd.isna(arr), dtype=bool)
    return np.zeros(arr.shape, dtype=bool)


def _infer_kind(valid: np.ndarray) -> str:
    """float / int / bool / category for the non-missing values."""
    kind = valid.dtype.kind
    if kind == "b":
        return "bool"
    if kind in "iu":
        return "int"
    if kind == "f":
        return "float"
    if kind in "US":
        return "category"
    seen = {type(v) for v in valid}
    if all(issubclass(t, bool | np.bool_) for t in seen):
        return "bool"
    if all(issubclass(t, str | np.str_) for t in seen):
        return "category"
    if all(issubclass(t, int | np.integer) and not issubclass(t, bool | np.bool_) for t in seen):
        return "int"
    if all(issubclass(t, int | float | np.number) for t in seen):
        return "float"
    raise DataTypeError(
        "The values are not all numbers, all booleans or all text (e.g. text mixed with "
        "numbers, or dates); clean the column or declare it as str to treat every value "
        "as a category."
    )


def _as_float(valid: np.ndarray) -> np.ndarray:
    try:
        out = np.asarray(valid, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataTypeError("These values are not numbers; declare the column as str.") from None
    if not np.all(np.isfinite(out)):
        raise DataTypeError("The values contain infinity; remove or cap those records.")
    return out


def category_labels(valid: np.ndarray, categories: object = None) -> np.ndarray:
    """Sorted unique labels, or the caller's order (every value must be listed)."""
    if categories is None:
        try:
            return np.asarray(sorted(set(valid.tolist())), dtype=object)
        except TypeError:
            raise DataTypeError("Categories of mixed types cannot be ordered.") from None
    labels = np.empty(len(list(categories)), dtype=object)  # type: ignore[arg-type]
    labels[:] = list(categories)  # type: ignore[call-overload]
    unknown = set(valid.tolist()) - set(labels.tolist())
    if unknown:
        raise UnknownCategoryError(
            f"Values {sorted(map(str, unknown))[:5]} are not in the category list "
            f"{labels.tolist()}; add them to the list or correct the data."
        )
    return labels


def encode(valid: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Codes 0..k-1 (float64) of ``valid`` in ``labels`` order."""
    index = {label: i for i, label in enumerate(labels.tolist())}
    try:
        return np.fromiter((index[v] for v in valid.tolist()), dtype=np.float64, count=valid.size)
    except KeyError as exc:
        raise UnknownCategoryError(f"Value {exc.args[0]!r} is not a known category.") from None


def prepare(data: object, data_type: object = None, categories: object = None) -> Prepared:
    """Validate and encode one column; EmptyDataError / DataTypeError on bad input."""
    declared = normalize_data_type(data_type)
    arr, container, dtype = _to_object_1d(data)
    if arr.size == 0:
        raise EmptyDataError("There are no values to analyse; choose a non-empty column.")
    missing = _missing_mask(arr)
    kept = ~missing
    valid = arr if not missing.any() else arr[kept]
    if valid.size == 0:
        raise EmptyDataError(
            f"All {arr.size} values are missing; choose a column with recorded values."
        )
    inferred = _infer_kind(valid)
    kind = inferred
    if declared in ("str", "char", "category") or categories is not None:
        kind = "category"
        if declared == "char" and not all(isinstance(v, str) and len(v) == 1 for v in valid):
            raise DataTypeError("Declared char, but some values are longer than one character.")
    elif declared is not None:
        if inferred == "category":
            raise DataTypeError(
                f"The values are text, so they cannot be treated as {declared}; "
                "declare the column as str (categories) or choose a numeric column."
            )
        kind = declared
    label_dtype = None
    labels = None
    if kind == "category":
        labels = category_labels(valid, categories)
        values = encode(valid, labels)
        label_dtype = dtype if dtype is not None and dtype.kind in "USO" else None
        out_dtype = None
    else:
        values = _as_float(valid)
        if kind == "bool" and not np.all((values == 0) | (values == 1)):
            raise DataTypeError("Declared bool, but some values are not 0/1 or True/False.")
        out_dtype = _output_dtype(kind, dtype)
    return Prepared(values, kind, labels, container, out_dtype, label_dtype, kept, declared or kind)


def _output_dtype(kind: str, dtype: np.dtype | None) -> np.dtype:
    if kind == "bool":
        return np.dtype(bool)
    if kind == "int":
        return dtype if dtype is not None and dtype.kind in "iu" else np.dtype(np.int64)
    return dtype if dtype is not None and dtype.kind == "f" else np.dtype(np.float64)


def restore(prep: Prepared, numeric: np.ndarray) -> np.ndarray | list:
    """The noised numeric vector in the input's type (labels, bools, ints or floats)."""
    if prep.kind == "category":
        assert prep.labels is not None
        codes = np.clip(np.rint(numeric), 0, prep.labels.size - 1).astype(np.intp)
        out = prep.labels[codes]
        if prep.container == "list":
            return out.tolist()
        return out.astype(prep.label_dtype) if prep.label_dtype is not None else out
    assert prep.out_dtype is not None
    if prep.kind == "bool":
        out = numeric > 0.5
    elif prep.kind == "int":
        info = np.iinfo(prep.out_dtype)
        out = np.clip(np.rint(numeric), info.min, info.max).astype(prep.out_dtype)
    else:
        out = numeric.astype(prep.out_dtype, copy=False)
    return out.tolist() if prep.container == "list" else out


def present(data: object) -> np.ndarray:
    """Bool mask of the non-missing positions of a list, array or Series."""
    arr, _, _ = _to_object_1d(data)
    return ~_missing_mask(arr)


def take(data: object, mask: np.ndarray) -> object:
    """The positions of ``mask`` from ``data``, in the same container and element types."""
    if isinstance(data, pd.Series):
        return data[mask].reset_index(drop=True)
    if isinstance(data, np.ndarray):
        return data[mask]
    return [v for v, keep in zip(data, mask, strict=True) if keep]  # type: ignore[call-overload]
