"""Per-attribute distances and their mapping to one comparable scale (paper §3.2).

Every quasi-identifier or sensitive column becomes a :class:`MappedAttribute`: integer codes
into its distinct values plus what is needed to measure distances between codes.

* Ordered kinds (numeric, ordinal, date, boolean) get a coordinate per distinct value.
  With ``Scaling.RANK`` (default) it is the mid-rank ECDF value in [0, 1], so the mapped
  distance |F(a) - F(b)| is distributed like |U - U'| for uniform U whatever the column's
  units (the paper's "mapped" distance, Eq. 1). ``ZSCORE`` uses (x - mean) / sd and
  ``NONE`` the raw value (ordinal: its position in the category list).
* Nominal kinds use 0/1 distance, hierarchical prefix codes (ICD, zip) use
  (L - common prefix) / L with L the longest code; both are multiplied by a weight so their
  mean pairwise distance equals the mean of the ordered attributes (1/3 under RANK).
* A missing value is kept as a value of its own: for ordered kinds a coordinate far below
  the range (farther from any real value than the whole range), for nominal and
  hierarchical kinds its own category / the empty code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import pandas as pd

from dp_engine.errors import DataTypeError, UnknownCategoryError
from dp_engine.schema import ColumnKind, ColumnSpec


class AttributeKind(StrEnum):
    """How distances are measured on one attribute."""

    NUMERIC = "numeric"
    ORDINAL = "ordinal"
    DATE = "date"
    BOOLEAN = "boolean"
    NOMINAL = "nominal"
    HIERARCHICAL = "hierarchical"

    @property
    def ordered(self) -> bool:
        return self in ORDERED_KINDS


ORDERED_KINDS = frozenset(
    {AttributeKind.NUMERIC, AttributeKind.ORDINAL, AttributeKind.DATE, AttributeKind.BOOLEAN}
)


class Scaling(StrEnum):
    """Coordinate used for ordered kinds."""

    RANK = "rank"
    ZSCORE = "zscore"
    NONE = "none"


_FROM_SCHEMA = {
    ColumnKind.NUMERIC: AttributeKind.NUMERIC,
    ColumnKind.ORDINAL: AttributeKind.ORDINAL,
    ColumnKind.DATE: AttributeKind.DATE,
    ColumnKind.BOOLEAN: AttributeKind.BOOLEAN,
    ColumnKind.CATEGORICAL: AttributeKind.NOMINAL,
}


def kind_for(spec: ColumnSpec | None, series: pd.Series) -> AttributeKind:
    """Distance kind from the schema's column kind, else from the pandas dtype."""
    if spec is not None:
        if spec.kind not in _FROM_SCHEMA:
            raise DataTypeError(
                f"Column '{spec.label}' is a {spec.kind.value} column; identifiers and free "
                "text cannot be anonymized by clustering. Drop it from the quasi-identifiers."
            )
        return _FROM_SCHEMA[spec.kind]
    if pd.api.types.is_bool_dtype(series):
        return AttributeKind.BOOLEAN
    if pd.api.types.is_datetime64_any_dtype(series):
        return AttributeKind.DATE
    if pd.api.types.is_numeric_dtype(series):
        return AttributeKind.NUMERIC
    return AttributeKind.NOMINAL


def mean_abs_difference(x: np.ndarray) -> float:
    """Mean of |x_i - x_j| over all ordered pairs i != j (Gini mean difference), O(n log n)."""
    x = np.sort(np.asarray(x, dtype=float))
    n = x.size
    if n < 2:
        return 0.0
    i = np.arange(n)
    return float(2.0 * np.sum((2 * i - n + 1) * x) / (n * (n - 1)))


@dataclass
class MappedAttribute:
    """One column as codes into distinct values, with its mapped distance."""

    name: str
    kind: AttributeKind
    values: np.ndarray  # distinct values (object); sorted for ordered kinds
    codes: np.ndarray  # int64 code of every record
    coord: np.ndarray  # ordered kinds: coordinate of each distinct value
    missing_code: int = -1  # code of the missing value, -1 if none
    weight: float = 1.0  # nominal / hierarchical multiplier
    prefix_ids: np.ndarray | None = None  # hierarchical: (V, L) id of each prefix length
    numeric: np.ndarray | None = None  # ordered kinds: numeric value of each distinct value
    notes: list[str] = field(default_factory=list)

    @property
    def n_values(self) -> int:
        return int(self.values.size)

    @property
    def constant(self) -> bool:
        return self.n_values <= 1

    @property
    def levels(self) -> int:
        return 0 if self.prefix_ids is None else int(self.prefix_ids.shape[1])

    def distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Mapped distance between code arrays ``a`` and ``b`` (broadcasting)."""
        a = np.asarray(a)
        b = np.asarray(b)
        if self.kind.ordered:
            return np.abs(self.coord[a] - self.coord[b])
        if self.kind is AttributeKind.NOMINAL:
            return self.weight * (a != b).astype(float)
        assert self.prefix_ids is not None
        lcp = (self.prefix_ids[a] == self.prefix_ids[b]).sum(axis=-1)
        return self.weight * (self.levels - lcp) / max(self.levels, 1)

    def raw_mean_distance(self) -> float:
        """Mean pairwise unweighted distance over the records (for the nominal weight)."""
        n = self.codes.size
        if n < 2:
            return 0.0
        if self.kind.ordered:
            return mean_abs_difference(self.coord[self.codes])
        if self.kind is AttributeKind.NOMINAL:
            p = np.bincount(self.codes) / n
            return float((1 - np.sum(p**2)) * n / (n - 1))
        assert self.prefix_ids is not None
        total = 0.0
        for lev in range(self.levels):
            p = np.bincount(self.prefix_ids[self.codes, lev]) / n
            total += (1 - np.sum(p**2)) * n / (n - 1)
        return total / max(self.levels, 1)

    def coords_of_values(self, values: pd.Series) -> np.ndarray:
        """Coordinates of arbitrary values of an ordered kind (e.g. a released mean).

        Linear interpolation between distinct values; exact for existing values.
        """
        x = _as_number(values, self.kind, self.name)
        out = np.full(x.size, self.coord[self.missing_code] if self.missing_code >= 0 else np.nan)
        ok = ~np.isnan(x)
        real = self.numeric[: self.n_values - (1 if self.missing_code >= 0 else 0)]
        creal = self.coord[: real.size]
        out[ok] = np.interp(x[ok], real, creal)
        return out

    def codes_of_values(self, values: pd.Series) -> np.ndarray:
        """Codes of existing values (nominal/hierarchical released values)."""
        lookup = {_key(v): i for i, v in enumerate(self.values)}
        return np.array([lookup[_key(v)] for v in values], dtype=np.int64)


def _key(v: object) -> object:
    return None if _is_missing(v) else v


def _is_missing(v: object) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _as_number(series: pd.Series, kind: AttributeKind, name: str) -> np.ndarray:
    """Numeric view of an ordered column (dates as ns, booleans as 0/1); NaN = missing."""
    s = pd.Series(series)
    try:
        if kind is AttributeKind.DATE:
            d = pd.to_datetime(s)
            ns = d.to_numpy(dtype="datetime64[ns]")
            out = ns.astype("int64").astype(float)
            out[np.isnat(ns)] = np.nan
            return out
        if kind is AttributeKind.BOOLEAN:
            mapped = s.map(_bool_value)
            return pd.to_numeric(mapped).to_numpy(dtype=float)
        return pd.to_numeric(s).to_numpy(dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataTypeError(
            f"Column '{name}' is declared {kind.value} but holds values that are not; "
            "fix the column kind in the schema."
        ) from exc


def _bool_value(v: object) -> float:
    if _is_missing(v):
        return np.nan
    if isinstance(v, str):
        low = v.strip().lower()
        if low in {"true", "yes", "1"}:
            return 1.0
        if low in {"false", "no", "0"}:
            return 0.0
        raise ValueError(v)
    if v in (0, 1):
        return float(v)  # type: ignore[arg-type]
    raise ValueError(v)


def map_attribute(
    name: str,
    series: pd.Series,
    kind: AttributeKind,
    scaling: Scaling = Scaling.RANK,
    categories: tuple | None = None,
) -> MappedAttribute:
    """Codes and mapped coordinates of one column (weight is set later by the table)."""
    kind = AttributeKind(kind)
    scaling = Scaling(scaling)
    if kind is AttributeKind.ORDINAL and categories:
        return _map_ordinal(name, series, categories, scaling)
    if kind.ordered:
        return _map_ordered(name, _as_number(series, kind, name), kind, scaling, series)
    if kind is AttributeKind.NOMINAL:
        return _map_nominal(name, series)
    return _map_hierarchical(name, series)


def _ordered_coord(counts: np.ndarray, numeric: np.ndarray, scaling: Scaling) -> np.ndarray:
    if scaling is Scaling.RANK:
        n = counts.sum()
        before = np.concatenate([[0], np.cumsum(counts)[:-1]])
        return (before + counts / 2.0) / n
    if scaling is Scaling.ZSCORE:
        mean = np.sum(counts * numeric) / counts.sum()
        sd = np.sqrt(np.sum(counts * (numeric - mean) ** 2) / counts.sum())
        return (numeric - mean) / sd if sd > 0 else np.zeros_like(numeric)
    return numeric.astype(float)


def _finish_ordered(
    name: str,
    kind: AttributeKind,
    x: np.ndarray,
    distinct_values: np.ndarray,
    numeric: np.ndarray,
    inverse: np.ndarray,
    scaling: Scaling,
) -> MappedAttribute:
    miss = np.isnan(x)
    counts = np.bincount(inverse[~miss], minlength=numeric.size)
    coord = _ordered_coord(counts, numeric, scaling) if numeric.size else np.zeros(0)
    codes = inverse.astype(np.int64)
    missing_code = -1
    values = distinct_values
    if miss.any():
        missing_code = numeric.size
        codes[miss] = missing_code
        lo, hi = (coord.min(), coord.max()) if coord.size else (0.0, 0.0)
        coord = np.append(coord, lo - 2 * (hi - lo) - 1)
        numeric = np.append(numeric, np.nan)
        values = np.append(values.astype(object), [None])
    return MappedAttribute(
        name,
        kind,
        np.asarray(values, dtype=object),
        codes,
        coord,
        missing_code,
        numeric=numeric,
    )


def _map_ordered(
    name: str, x: np.ndarray, kind: AttributeKind, scaling: Scaling, series: pd.Series
) -> MappedAttribute:
    miss = np.isnan(x)
    numeric, inverse = np.unique(x[~miss], return_inverse=True)
    full_inverse = np.zeros(x.size, dtype=np.int64)
    full_inverse[~miss] = inverse
    if kind is AttributeKind.DATE:
        distinct = pd.to_datetime(numeric.astype("int64"), unit="ns").to_numpy(dtype=object)
    elif kind is AttributeKind.BOOLEAN:
        distinct = numeric.astype(bool).astype(object)
    else:
        distinct = numeric.astype(object)
    return _finish_ordered(name, kind, x, distinct, numeric, full_inverse, scaling)


def _map_ordinal(
    name: str, series: pd.Series, categories: tuple, scaling: Scaling
) -> MappedAttribute:
    pos = {c: i for i, c in enumerate(categories)}
    x = np.empty(len(series), dtype=float)
    for i, v in enumerate(series):
        if _is_missing(v):
            x[i] = np.nan
        elif v in pos:
            x[i] = pos[v]
        else:
            raise UnknownCategoryError(
                f"Column '{name}' holds {v!r}, which is not among its ordered categories "
                f"{list(categories)}; fix the data or the schema."
            )
    present, inverse = np.unique(x[~np.isnan(x)], return_inverse=True)
    full_inverse = np.zeros(x.size, dtype=np.int64)
    full_inverse[~np.isnan(x)] = inverse
    distinct = np.array([categories[int(p)] for p in present], dtype=object)
    return _finish_ordered(name, AttributeKind.ORDINAL, x, distinct, present, full_inverse, scaling)


def _map_nominal(name: str, series: pd.Series) -> MappedAttribute:
    keys = [_key(v) for v in series]
    distinct = sorted({k for k in keys if k is not None}, key=lambda v: (str(type(v)), str(v)))
    has_missing = any(k is None for k in keys)
    values = distinct + ([None] if has_missing else [])
    lookup = {v: i for i, v in enumerate(values)}
    codes = np.fromiter((lookup[k] for k in keys), dtype=np.int64, count=len(keys))
    return MappedAttribute(
        name,
        AttributeKind.NOMINAL,
        np.array(values, dtype=object),
        codes,
        np.zeros(len(values)),
        missing_code=len(values) - 1 if has_missing else -1,
    )


def _map_hierarchical(name: str, series: pd.Series) -> MappedAttribute:
    keys = ["" if _is_missing(v) else str(v) for v in series]
    values = sorted(set(keys))
    lookup = {v: i for i, v in enumerate(values)}
    codes = np.fromiter((lookup[k] for k in keys), dtype=np.int64, count=len(keys))
    levels = max((len(v) for v in values), default=0)
    prefix_ids = np.zeros((len(values), max(levels, 1)), dtype=np.int64)
    for lev in range(levels):
        prefixes = [v[: lev + 1] if len(v) > lev else v + "\0" * (lev + 1 - len(v)) for v in values]
        ids = {p: i for i, p in enumerate(sorted(set(prefixes)))}
        prefix_ids[:, lev] = [ids[p] for p in prefixes]
    has_missing = "" in lookup
    return MappedAttribute(
        name,
        AttributeKind.HIERARCHICAL,
        np.array([None if v == "" else v for v in values], dtype=object),
        codes,
        np.zeros(len(values)),
        missing_code=lookup[""] if has_missing else -1,
        prefix_ids=prefix_ids[:, :levels] if levels else prefix_ids[:, :0],
    )


def prefix_distance(a: str, b: str, levels: int | None = None) -> float:
    """Unweighted prefix distance (L - common prefix) / L between two codes."""
    length = levels if levels is not None else max(len(a), len(b))
    if length == 0:
        return 0.0
    common = 0
    for ca, cb in zip(a, b, strict=False):
        if ca != cb:
            break
        common += 1
    return (length - common) / length


def set_weights(attrs: list[MappedAttribute], scaling: Scaling) -> float:
    """Weight nominal/hierarchical attributes so their mean distance matches the ordered ones.

    Returns the target mean distance (mean over ordered attributes; 1/3 if there are none).
    Under ``Scaling.NONE`` weights stay 1 (raw distances, used by hand-made examples).
    """
    ordered = [a.raw_mean_distance() for a in attrs if a.kind.ordered and not a.constant]
    target = float(np.mean(ordered)) if ordered else 1.0 / 3.0
    for a in attrs:
        if a.kind.ordered:
            continue
        if scaling is Scaling.NONE:
            a.weight = 1.0
            continue
        raw = a.raw_mean_distance()
        a.weight = target / raw if raw > 0 else 1.0
    return target
