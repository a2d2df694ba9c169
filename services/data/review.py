"""What the owner must see before a schema becomes public: per-column facts read off the data.

Everything here is computed from private rows, so it is owner-only (the Data page; never a
non-owner response). It is recomputed each time a schema is applied, so the clamp counts are
always those of the bounds now in the schema.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from dp_engine.schema import Schema
from services.data.limits import PATIENT_ROWS_PERCENTILE
from services.data.patients import RowsPerPatient, best_repeated, propose_bound, rows_per_patient


@dataclass(frozen=True)
class DefaultCheck:
    """A recognised clinical default that is not applied because it would clamp > 1 %."""

    label: str
    lower: float
    upper: float
    below: int
    above: int
    present: int

    @property
    def share(self) -> float:
        return (self.below + self.above) / self.present if self.present else 0.0


@dataclass(frozen=True)
class ColumnReview:
    """Owner-only facts about one column under the current schema."""

    name: str
    present: int = 0
    all_missing: bool = False
    constant: str | None = None          # the one value of a constant column
    clamped_below: int = 0               # values the lower bound moves up
    clamped_above: int = 0               # values the upper bound moves down
    default: DefaultCheck | None = None
    rare_levels: tuple[tuple[str, int], ...] = ()  # (level, records), data-derived lists only
    coded: int = 0                       # cells read as missing through the column's codes
    other: int = 0                       # cells read as the catch-all level
    span: tuple[str, str] | None = None  # smallest and largest value seen, readable text

    @property
    def clamped(self) -> int:
        return self.clamped_below + self.clamped_above

    def notes(self, rare_level_min: int) -> list[str]:
        """Sentences for the owner, most important first."""
        out = []
        if self.all_missing:
            out.append("Every value is missing: the column is kept but holds no information.")
        elif self.constant is not None:
            out.append(f"Constant: every value is {self.constant}. Kept; it carries no "
                       "information, and means need bounds you set.")
        d = self.default
        if d is not None:
            out.append(
                f"The clinical default for {d.label} ({_num(d.lower)}–{_num(d.upper)}) would "
                f"clamp {d.below + d.above} of {d.present} values ({d.share:.0%}): {d.below} "
                f"below {_num(d.lower)}, {d.above} above {_num(d.upper)}. Not applied — the "
                "data may use another scale. Type those bounds to use it anyway."
            )
        if self.rare_levels:
            levels = ", ".join(f"{lvl} ({n})" for lvl, n in self.rare_levels)
            out.append(f"Rare levels (fewer than {rare_level_min} records): {levels}. Merge "
                       "them into 'other' before the list becomes public.")
        if self.coded:
            out.append(f"{self.coded} cell(s) held a missing-value code and are missing.")
        if self.other:
            out.append(f"{self.other} cell(s) outside the list are read as the catch-all level.")
        return out


@dataclass(frozen=True, eq=False)
class DataReview:
    """The owner's review of one dataset: per-column facts and the rows per patient.

    ``id_columns`` are the candidate patient columns of the loaded frame (references, not
    copies); their rows-per-patient counts (a hash pass each) are computed when first read,
    so loading a dataset no page looks at does not pay for them.
    """

    rows: int
    columns: dict[str, ColumnReview]
    rare_level_min: int
    id_columns: dict[str, pd.Series] = field(default_factory=dict, repr=False)
    candidates: tuple[str, ...] = ()

    @cached_property
    def patients(self) -> dict[str, RowsPerPatient]:
        """Rows per patient of each candidate column."""
        return {name: rows_per_patient(name, col) for name, col in self.id_columns.items()}

    def column(self, name: str) -> ColumnReview:
        return self.columns.get(name) or ColumnReview(name)

    def notes(self, name: str) -> list[str]:
        """Everything the owner should read about one column (its table row)."""
        out = self.column(name).notes(self.rare_level_min)
        stats = self.patients.get(name)
        if stats is not None and stats.repeated:
            out.append(f"Ids repeat: {stats.repeated} of {stats.patients} have more than one "
                       f"row (up to {stats.max_rows}) — rows are not patients.")
        return out

    def repeated(self) -> RowsPerPatient | None:
        """The first candidate patient column whose ids repeat, if any."""
        return best_repeated(self.patients, self.candidates)

    def proposed_bound(self, column: str | None) -> int:
        """k proposed from the data for ``column`` (1 without a column or statistics)."""
        stats = self.patients.get(column or "")
        return propose_bound(stats) if stats is not None else 1

    def unit_lines(self, schema: Schema) -> list[str]:
        """What the guarantee protects, said truthfully: per patient or per row."""
        col, k = schema.patient_column, schema.max_rows_per_patient
        if col is not None:
            lines = [f"Unit of privacy: per patient — '{col}' identifies a patient and at most "
                     f"{k} row(s) of each patient are used."]
            stats = self.patients.get(col)
            if stats is not None:
                lines.append(
                    f"'{col}': {stats.patients} patients in {stats.rows} rows (up to "
                    f"{stats.max_rows} each). {stats.patients_over(k)} patient(s) have more "
                    f"than {k} rows; their {stats.rows_beyond(k)} extra row(s) are left out."
                )
                if stats.missing:
                    lines.append(f"{stats.missing} row(s) have no '{col}' and are left out.")
            if schema.patient_bound_derived:
                lines.append(f"k = {k} was proposed from the data (the "
                             f"{PATIENT_ROWS_PERCENTILE:g}th percentile of rows per patient): "
                             "confirm it, or type a bound your protocol fixes.")
            return lines
        repeated = self.repeated()
        if repeated is not None:
            return [
                "Unit of privacy: per row — NOT per patient. "
                f"'{repeated.column}' repeats: {repeated.repeated} of {repeated.patients} ids "
                f"have more than one row (up to {repeated.max_rows}), so a patient with r rows "
                "is protected only at r times the stated ε. Choose the patient column below.",
            ]
        unique = [n for n in self.candidates if n in self.patients]
        if unique:
            return [f"Unit of privacy: per row; every '{unique[0]}' is on one row only, so "
                    "each row is one patient and the guarantee is per patient."]
        return ["Unit of privacy: per row. No column identifies patients; the guarantee is per "
                "patient only if each patient has a single row."]


def readable(x: float | int | None) -> str:
    """A number as people write it: 2017 (never 2.02e+03), 0.25, 1234567.5; "" for None.

    Plain digits without separators, so the text also reads back as the same number.
    """
    if x is None:
        return ""
    value = float(x)
    if not math.isfinite(value):
        return str(value)
    if value.is_integer():
        return str(int(value))
    return np.format_float_positional(value, trim="-")


_num = readable
