"""Dataset schema: the public metadata that sound-mode DP relies on.

Bounds, category lists and histogram bins must be public facts (an age range,
PI-RADS 1–5), never computed from the data. A value proposed from the data is
kept but flagged ``derived_from_data`` until the data owner confirms it.
This module is pure: reading and writing schema files lives in ``services/``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from dp_engine.errors import SchemaError

Category = str | int | float | bool

MAX_BINS = 1_000
"""Most histogram bins a column may have: every bin is a noisy count, a table row and a bar."""
MAX_CATEGORIES = 200
"""Most categories a column may list (each is a group or a bar, with its own noise)."""


class ColumnKind(StrEnum):
    """What a column holds; decides which statistics and distances apply."""

    NUMERIC = "numeric"
    ORDINAL = "ordinal"
    CATEGORICAL = "categorical"
    BOOLEAN = "boolean"
    DATE = "date"
    IDENTIFIER = "identifier"
    FREE_TEXT = "free_text"


class ColumnRole(StrEnum):
    """Disclosure role of a column (anonymization vocabulary)."""

    DIRECT_IDENTIFIER = "direct_identifier"
    QUASI_IDENTIFIER = "quasi_identifier"
    SENSITIVE = "sensitive"
    OTHER = "other"


QUERYABLE_KINDS = frozenset(
    {ColumnKind.NUMERIC, ColumnKind.ORDINAL, ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN}
)
NUMERIC_KINDS = frozenset({ColumnKind.NUMERIC, ColumnKind.ORDINAL})


@dataclass(frozen=True)
class ColumnSpec:
    """Public metadata of one column.

    numeric: ``lower``/``upper`` (clamping bounds) and ``bin_width`` (histograms).
    ordinal: ``categories`` in order (e.g. PI-RADS 1..5); ``lower``/``upper`` may
    also be set so the column can be averaged. categorical / boolean: ``categories``.
    ``derived_from_data`` flags any bound or category list proposed from the data.
    ``missing_codes``: cell values that mean "missing" in this column (``999``, a code ``2``).
    ``other_level``: the category every value outside ``categories`` is read as (rare levels
    merged into "other"); without it such values are read as missing.
    """

    name: str
    kind: ColumnKind
    role: ColumnRole = ColumnRole.OTHER
    label: str = ""
    unit: str = ""
    lower: float | None = None
    upper: float | None = None
    bin_width: float | None = None
    categories: tuple[Category, ...] | None = None
    derived_from_data: bool = False
    description: str = ""
    missing_codes: tuple[str, ...] = ()
    other_level: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ColumnKind(self.kind))
        object.__setattr__(self, "role", ColumnRole(self.role))
        if not self.label:
            object.__setattr__(self, "label", self.name)
        if self.categories is not None:
            if hasattr(self.categories, "__len__") and len(self.categories) > MAX_CATEGORIES:
                self._too_many_categories(len(self.categories))
            object.__setattr__(self, "categories", tuple(self.categories))
            if len(self.categories) > MAX_CATEGORIES:
                self._too_many_categories(len(self.categories))
        codes = () if self.missing_codes is None else self.missing_codes
        if isinstance(codes, str):
            codes = (codes,)
        object.__setattr__(self, "missing_codes",
                           tuple(dict.fromkeys(str(c).strip() for c in codes if str(c).strip())))
        if self.other_level is not None:
            other = str(self.other_level).strip()
            if not self.categories or other not in {str(c) for c in self.categories}:
                raise SchemaError(
                    f"Column '{self.label}': the catch-all level '{other}' must be one of its "
                    "categories."
                )
            object.__setattr__(self, "other_level", other)
        if self.kind is ColumnKind.NUMERIC or (self.kind is ColumnKind.ORDINAL
                                               and self.categories is None):
            self._check_bin_count()

    def _too_many_categories(self, n: int) -> None:
        raise SchemaError(
            f"Column '{self.label}' lists {n:,} categories; at most {MAX_CATEGORIES} are "
            "allowed. Group rare values into broader categories (or 'other'), or mark the "
            "column as free text so it is not counted by category."
        )

    def _check_bin_count(self) -> None:
        """Refuse a bin width that makes more than MAX_BINS bins, before any bin exists."""
        try:
            lo, hi, width = float(self.lower), float(self.upper), float(self.bin_width)
        except (TypeError, ValueError):
            return  # missing or non-numeric: bounds() and bin_edges() say what is wrong
        if not all(math.isfinite(v) for v in (lo, hi, width)) or lo >= hi or width <= 0:
            return
        n_bins = (hi - lo) / width
        if not math.isfinite(n_bins):
            return  # bounds too far apart for floats: bin_edges() refuses them with a message
        if n_bins > MAX_BINS:
            smallest = (hi - lo) / MAX_BINS
            raise SchemaError(
                f"Column '{self.label}': a bin width of {width:g} between {lo:g} and {hi:g} "
                f"makes {math.ceil(n_bins):,} histogram bins; at most {MAX_BINS:,} are allowed. "
                f"Choose a bin width of at least {smallest:.3g}."
            )

    @property
    def display(self) -> str:
        """Axis label with unit, e.g. ``Age (years)``."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    @property
    def queryable(self) -> bool:
        """True when a non-owner may ask DP statistics about this column."""
        return self.kind in QUERYABLE_KINDS and self.role is not ColumnRole.DIRECT_IDENTIFIER

    @property
    def has_bounds(self) -> bool:
        return self.lower is not None and self.upper is not None

    def bounds(self) -> tuple[float, float]:
        """Public clamping bounds; SchemaError when missing or invalid."""
        if not self.has_bounds:
            raise SchemaError(
                f"Column '{self.label}' has no public lower/upper bounds; "
                "set them in the dataset schema before asking for a mean, median or variance."
            )
        lo, hi = float(self.lower), float(self.upper)  # type: ignore[arg-type]
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise SchemaError(
                f"Column '{self.label}' has invalid bounds [{self.lower}, {self.upper}]: "
                "the lower bound must be a finite number below the upper bound."
            )
        return lo, hi

    def bin_edges(self) -> np.ndarray:
        """Histogram bin edges from the public bounds and bin width."""
        lo, hi = self.bounds()
        width = self.bin_width if self.bin_width else (hi - lo) / 10.0
        if not (math.isfinite(width) and width > 0):
            raise SchemaError(f"Column '{self.label}' has an invalid bin width {self.bin_width}.")
        if not (hi - lo) / width <= MAX_BINS:  # also when the span overflows to inf
            self._check_bin_count()  # raises with the message that says what to choose
            raise SchemaError(
                f"Column '{self.label}': its bounds [{lo:g}, {hi:g}] are too far apart for "
                f"histogram bins (at most {MAX_BINS:,}); set narrower public bounds.")
        n_bins = max(1, math.ceil((hi - lo) / width - 1e-9))
        return lo + width * np.arange(n_bins + 1, dtype=float)

    def category_list(self) -> tuple[Category, ...]:
        """Public categories; SchemaError when the column has none."""
        if not self.categories:
            raise SchemaError(
                f"Column '{self.label}' has no public category list; "
                "add one to the dataset schema to group or count by it."
            )
        return self.categories

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["role"] = self.role.value
        d["categories"] = list(self.categories) if self.categories is not None else None
        d["missing_codes"] = list(self.missing_codes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ColumnSpec:
        try:
            known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
            return cls(**known)
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"Invalid column description {d.get('name', '?')!r}: {exc}") from exc


@dataclass(frozen=True)
class Schema:
    """All public metadata of one dataset; ``confirmed`` once the owner approved it.

    The unit of privacy: ``patient_column`` names the column that identifies a patient and
    ``max_rows_per_patient`` (k) bounds how many rows of one patient any statistic may use, so
    a guarantee is per patient. Without a patient column each row is one patient (k = 1).
    ``patient_bound_derived`` flags a k proposed from the data (like ``derived_from_data``).
    """

    dataset: str
    columns: tuple[ColumnSpec, ...]
    confirmed: bool = False
    title: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    patient_column: str | None = None
    max_rows_per_patient: int = 1
    patient_bound_derived: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", tuple(self.columns))
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise SchemaError("The schema names a column twice; column names must be unique.")
        self._check_patient_unit()

    def _check_patient_unit(self) -> None:
        k = self.max_rows_per_patient
        if isinstance(k, bool) or not isinstance(k, int | float) or not float(k).is_integer() \
                or k < 1:
            raise SchemaError(
                f"The number of rows per patient must be a whole number of at least 1, not {k!r}."
            )
        object.__setattr__(self, "max_rows_per_patient", int(k))
        if self.patient_column is None:
            if k != 1:
                raise SchemaError(
                    "A bound on rows per patient needs the column that identifies a patient."
                )
            object.__setattr__(self, "patient_bound_derived", False)
            return
        spec = next((c for c in self.columns if c.name == self.patient_column), None)
        if spec is None:
            raise SchemaError(f"The patient column '{self.patient_column}' is not in the dataset.")
        if spec.queryable:
            raise SchemaError(
                f"The patient column '{spec.name}' must be an identifier that is never shown to "
                "non-owners: set its kind to 'identifier' or its role to 'direct_identifier'."
            )

    @property
    def privacy_unit(self) -> str:
        """``"patient"`` when a patient column bounds each patient's rows, else ``"row"``."""
        return "patient" if self.patient_column is not None else "row"

    @property
    def contribution_bound(self) -> int:
        """k: the most rows of one patient a statistic may use (1 when a row is a patient)."""
        return self.max_rows_per_patient if self.patient_column is not None else 1

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnSpec:
        for c in self.columns:
            if c.name == name:
                return c
        raise SchemaError(f"The dataset has no column named '{name}'.")

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self.columns)

    def queryable_columns(self) -> list[ColumnSpec]:
        return [c for c in self.columns if c.queryable]

    def flagged_columns(self) -> list[ColumnSpec]:
        """Columns with metadata derived from the data (not private until confirmed)."""
        return [c for c in self.columns if c.derived_from_data]

    def with_column(self, spec: ColumnSpec) -> Schema:
        """A copy with one column's metadata replaced (the owner's edit)."""
        cols = tuple(spec if c.name == spec.name else c for c in self.columns)
        return replace(self, columns=cols)

    def awaiting_confirmation(self) -> list[str]:
        """What the owner has not confirmed yet: flagged column names, then "rows per patient"."""
        waiting = [c.name for c in self.flagged_columns()]
        return [*waiting, "rows per patient"] if self.patient_bound_derived else waiting

    def confirm_columns(self, names: list[str] | tuple[str, ...] | set[str]) -> Schema:
        """The owner's approval of the named columns' data-derived metadata (a whole kind of
        decision at once, or one column)."""
        unknown = set(names) - set(self.names)
        if unknown:
            raise SchemaError(f"The dataset has no column named {', '.join(sorted(unknown))}.")
        cols = tuple(replace(c, derived_from_data=False) if c.name in names else c
                     for c in self.columns)
        return replace(self, columns=cols)

    def confirm(self) -> Schema:
        """The owner's approval of the whole schema: it becomes public metadata.

        Refused while anything derived from the data is unconfirmed: those columns (and a
        proposed rows-per-patient bound) are confirmed first, per kind of decision or each.
        """
        waiting = self.awaiting_confirmation()
        if waiting:
            raise SchemaError(
                "Confirm or edit these first; they were read off the data: "
                f"{', '.join(waiting)}."
            )
        return replace(self, confirmed=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "title": self.title,
            "confirmed": self.confirmed,
            "notes": list(self.notes),
            "patient_column": self.patient_column,
            "max_rows_per_patient": self.max_rows_per_patient,
            "patient_bound_derived": self.patient_bound_derived,
            "columns": [c.to_dict() for c in self.columns],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schema:
        if not isinstance(d, dict) or "columns" not in d:
            raise SchemaError("A schema needs a 'columns' list.")
        return cls(
            dataset=str(d.get("dataset", "")),
            columns=tuple(ColumnSpec.from_dict(c) for c in d["columns"]),
            confirmed=bool(d.get("confirmed", False)),
            title=str(d.get("title", "")),
            notes=tuple(d.get("notes", ())),
            patient_column=str(d["patient_column"]) if d.get("patient_column") else None,
            max_rows_per_patient=d.get("max_rows_per_patient", 1),
            patient_bound_derived=bool(d.get("patient_bound_derived", False)),
        )
