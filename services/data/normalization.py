"""Apply a schema to a raw table: types, public bounds (clamping) and category lists.

The result is the frame every page computes on: numeric -> float64, whole-number ordinals ->
Int64, booleans -> nullable boolean, dates -> datetime64, categoricals -> str values equal to a
schema category, identifiers and free text -> str (numeric identifiers stay numbers); missing is NA.
A numeric column whose non-missing cells are mostly text is refused (the file or the schema
is probably wrong); a few text cells are read as missing and counted.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from dp_engine.schema import ColumnKind, ColumnSpec, Schema
from services.data.errors import DatasetError
from services.data.integrity import check_counts, present_counts
from services.data.limits import RARE_LEVEL_MIN
from services.data.load_report import LoadReport
from services.data.patients import candidates
from services.data.review import ColumnReview, DataReview, DefaultCheck, readable
from services.data.schema_inference import clamp_counts, clinical_default, would_ask
from services.data.value_parsing import (
    Parsed,
    match_categories,
    parse_booleans,
    parse_dates,
    parse_numbers,
)

MOSTLY_TEXT = 0.5  # refuse a numeric column when more than this share of cells is text


def _is_number(c: object) -> bool:
    return isinstance(c, int | float | np.integer | np.floating) and not isinstance(c, bool)


def _tidy_number(c: object) -> int | float:
    f = float(c)  # type: ignore[arg-type]
    return int(f) if f.is_integer() else f


def canonical_spec(spec: ColumnSpec) -> ColumnSpec:
    """Categories in the form the frame holds: str for categorical, numbers for ordinals."""
    cats = spec.categories
    if spec.kind is ColumnKind.BOOLEAN:
        return replace(spec, categories=(False, True))
    if cats is None:
        return spec
    if spec.kind is ColumnKind.CATEGORICAL:
        return replace(spec, categories=tuple(str(c) for c in cats))
    if spec.kind is ColumnKind.ORDINAL and all(_is_number(c) for c in cats):
        return replace(spec, categories=tuple(_tidy_number(c) for c in cats))
    if spec.kind is ColumnKind.ORDINAL and all(_numeric_text(c) for c in cats):
        return replace(spec, categories=tuple(_tidy_number(float(str(c))) for c in cats))
    return spec


def _numeric_text(c: object) -> bool:
    try:
        float(str(c))
        return True
    except ValueError:
        return False


def as_text(col: pd.Series, *, keep_numbers: bool = False) -> pd.Series:
    """String values (whole floats written without '.0').

    With ``keep_numbers`` a numeric column (an identifier nobody computes on) keeps a number
    type, whole floats becoming Int64: converting a million IDs to text would cost more than
    the whole CSV parse.
    """
    if pd.api.types.is_float_dtype(col.dtype):
        values = col.to_numpy(dtype="float64", na_value=np.nan)
        finite = values[~np.isnan(values)]
        if np.all(np.mod(finite, 1) == 0):
            col = pd.Series(whole_numbers(values), index=col.index)
    if isinstance(col.dtype, pd.StringDtype):
        return col
    if keep_numbers and pd.api.types.is_numeric_dtype(col.dtype):
        return col
    return col.astype("str")


def whole_numbers(values: np.ndarray) -> pd.arrays.IntegerArray:
    """Int64 array from whole floats with NaN as missing (built directly, no per-cell pass)."""
    mask = np.isnan(values)
    return pd.arrays.IntegerArray(np.where(mask, 0, values).astype("int64"), mask)


class _Tally:
    """Per-column counts for the load report and the owner's review."""

    def __init__(self, rare_level_min: int = RARE_LEVEL_MIN) -> None:
        self.rare_level_min = rare_level_min
        self.dropped: dict[str, int] = {}
        self.clamped: dict[str, int] = {}
        self.open_ended: dict[str, int] = {}
        self.missing: dict[str, int] = {}
        self.coded: dict[str, int] = {}
        self.other: dict[str, int] = {}
        self.review: dict[str, dict] = {}

    @staticmethod
    def add(d: dict[str, int], name: str, n: int) -> None:
        if n:
            d[name] = d.get(name, 0) + int(n)

    def note(self, name: str, **facts) -> None:
        self.review.setdefault(name, {}).update(facts)

    def record(self, name: str, parsed: Parsed) -> pd.Series:
        self.add(self.dropped, name, parsed.bad)
        self.add(self.missing, name, parsed.missing)
        self.add(self.open_ended, name, parsed.open_ended)
        self.add(self.coded, name, parsed.coded)
        self.add(self.other, name, parsed.other)
        n = len(parsed.values)
        self.note(name, present=n - parsed.missing, all_missing=n > 0 and parsed.missing == n,
                  coded=parsed.coded, other=parsed.other)
        return parsed.values

    def levels(self, spec: ColumnSpec, levels: dict[str, int] | None) -> None:
        """Constant columns, and rare levels of a category list read off the data."""
        if not levels:
            return
        seen = [lvl for lvl, n in levels.items() if n]
        if len(seen) == 1:
            self.note(spec.name, constant=seen[0])
        if spec.derived_from_data:
            rare = tuple((lvl, n) for lvl, n in levels.items()
                         if 0 < n < self.rare_level_min and lvl != spec.other_level)
            self.note(spec.name, rare_levels=rare)

    def build(self, frame: pd.DataFrame, schema: Schema) -> DataReview:
        cols = {name: ColumnReview(name, **facts) for name, facts in self.review.items()}
        order = [n for n in candidates(schema) if n in frame.columns]
        return DataReview(len(frame), cols, self.rare_level_min,
                          {n: frame[n] for n in order}, tuple(order))


def _numbers(col: pd.Series, spec: ColumnSpec, tally: _Tally, filename: str) -> np.ndarray:
    parsed = parse_numbers(col, spec.missing_codes)
    present = len(col) - (parsed.missing - parsed.bad)
    if present and parsed.bad > MOSTLY_TEXT * present:
        raise DatasetError(
            f"Column '{spec.name}' of '{filename}' should hold numbers, but {parsed.bad} of its "
            f"{present} values are text. Check the column order and separator, or change the "
            "column's kind to categorical in the schema."
        )
    values = tally.record(spec.name, parsed).to_numpy(dtype="float64", na_value=np.nan)
    _review_numbers(values, spec, tally)
    if spec.has_bounds:
        lo, hi = spec.bounds()
        below, above = clamp_counts(values, lo, hi)
        tally.add(tally.clamped, spec.name, below + above)
        tally.note(spec.name, clamped_below=below, clamped_above=above)
        values = np.clip(values, lo, hi)
    return values


def _review_numbers(values: np.ndarray, spec: ColumnSpec, tally: _Tally) -> None:
    """Constant values, and a recognised default the schema does not use that would clamp."""
    if values.size and not np.isnan(values).all():
        lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
        tally.note(spec.name, span=(readable(lo), readable(hi)))
        if lo == hi:
            tally.note(spec.name, constant=readable(lo))
    base = clinical_default(spec.name)
    if base is None or not base.has_bounds or (base.lower, base.upper) == (spec.lower,
                                                                            spec.upper):
        return
    below, above = clamp_counts(values, *base.bounds())
    present = int(np.count_nonzero(~np.isnan(values)))
    if would_ask(below, above, present):
        tally.note(spec.name, default=DefaultCheck(base.label, float(base.lower),
                                                   float(base.upper), below, above, present))


def _ordinal(col: pd.Series, spec: ColumnSpec, tally: _Tally, filename: str) -> pd.Series:
    cats = spec.categories
    if cats is not None and not all(_is_number(c) for c in cats):
        return _categories(col, spec, tally)
    values = _numbers(col, spec, tally, filename)
    if cats is not None:
        allowed = np.asarray([float(c) for c in cats])
        outside = ~np.isnan(values) & ~np.isin(values, allowed)
        tally.add(tally.dropped, spec.name, int(outside.sum()))
        tally.add(tally.missing, spec.name, int(outside.sum()))
        values = np.where(outside, np.nan, values)
        if all(float(c).is_integer() for c in cats):
            return pd.Series(whole_numbers(values), index=col.index)
    return pd.Series(values, index=col.index, dtype="float64")


def _categories(col: pd.Series, spec: ColumnSpec, tally: _Tally) -> pd.Series:
    parsed = match_categories(col, spec.categories or (), spec.missing_codes, spec.other_level)
    tally.levels(spec, parsed.levels)
    return tally.record(spec.name, parsed)


def _booleans(col: pd.Series, spec: ColumnSpec, tally: _Tally) -> pd.Series:
    values = tally.record(spec.name, parse_booleans(col, spec.missing_codes))
    trues, present = int(values.sum()), int(values.notna().sum())
    if present and trues in (0, present):
        tally.note(spec.name, constant=str(bool(trues)))
    return values


def _column(col: pd.Series, spec: ColumnSpec, tally: _Tally, filename: str) -> pd.Series:
    kind = spec.kind
    if kind is ColumnKind.NUMERIC:
        return pd.Series(_numbers(col, spec, tally, filename), index=col.index, dtype="float64")
    if kind is ColumnKind.ORDINAL:
        return _ordinal(col, spec, tally, filename)
    if kind is ColumnKind.BOOLEAN:
        return _booleans(col, spec, tally)
    if kind is ColumnKind.DATE:
        dates = tally.record(spec.name, parse_dates(col, spec.missing_codes))
        if dates.notna().any():
            tally.note(spec.name, span=(f"{dates.min():%Y-%m-%d}", f"{dates.max():%Y-%m-%d}"))
        return dates
    if kind is ColumnKind.CATEGORICAL and spec.categories is not None:
        return _categories(col, spec, tally)
    tally.note(spec.name, all_missing=bool(len(col)) and bool(col.isna().all()))
    return as_text(col, keep_numbers=kind in (ColumnKind.IDENTIFIER, ColumnKind.FREE_TEXT))


def apply_schema(
    raw: pd.DataFrame, schema: Schema, *, filename: str, rare_level_min: int = RARE_LEVEL_MIN
) -> tuple[pd.DataFrame, Schema, LoadReport]:
    """Typed, clamped frame in schema column order; DatasetError if the file lacks a column.

    The report carries the owner's review (clamp counts per bound, constant and empty columns,
    rare levels of data-derived lists, rows per patient).
    """
    absent = [name for name in schema.names if name not in raw.columns]
    if absent:
        raise DatasetError(
            f"'{filename}' lacks column(s) named in its schema: {', '.join(absent)}. "
            "Check the header row, or upload the file again to get a new proposed schema."
        )
    extra = [str(c) for c in raw.columns if c not in schema]
    schema = replace(schema, columns=tuple(canonical_spec(c) for c in schema.columns))
    tally = _Tally(rare_level_min)
    # A chunk of a streamed file is labelled from its offset (1_000_000, …): every column is
    # built on positions 0..n-1, or pandas would align the values away on the labels.
    raw = raw.reset_index(drop=True)
    columns = {spec.name: _column(raw[spec.name], spec, tally, filename)
               for spec in schema.columns}
    parsed = {name: int(col.notna().sum()) for name, col in columns.items()}
    frame = pd.DataFrame(columns, index=pd.RangeIndex(len(raw)), copy=False)
    check_counts(parsed, present_counts(frame), len(raw), len(frame), filename)
    notes = (f"Ignored column(s) not in the schema: {', '.join(extra)}.",) if extra else ()
    report = LoadReport(
        rows=len(frame), columns=frame.shape[1], missing=tally.missing, dropped=tally.dropped,
        present=parsed,
        clamped=tally.clamped, open_ended=tally.open_ended, warnings=notes, coded=tally.coded,
        other=tally.other, review=tally.build(frame, schema),
    )
    return frame, schema, report
