"""The owner's checklist: one decision per kind of public metadata, with what becomes public.

Whatever a proposed schema read off the data (bounds, category lists, code labels, the
rows-per-patient bound k) stays flagged, and the dataset stays private, until the owner
confirms it. Instead of one decision per column, the Data page groups the columns by the kind
of decision they need and lists for each what becomes public and what it does to the data
(clamp counts, rare levels, missing-value codes: owner-only facts). One tick confirms a kind.
Kinds that hold only public facts (clinical defaults, yes/no, metadata the owner set, hidden
columns) need no tick: they are listed and confirmed with the schema.

A tick carries a digest of the listing it confirmed: a tick on a listing that has changed
since (another tab saved an edit) confirms nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from dp_engine.errors import SchemaError
from dp_engine.schema import ColumnKind, ColumnSpec, Schema
from services.data.review import DataReview, readable
from services.data.schema_inference import clinical_default
from services.data.value_parsing import coded

BOUNDS, LEVELS, LABELS, PATIENT = "bounds", "levels", "labels", "patient"
CLINICAL, YES_NO, GIVEN, HIDDEN = "clinical", "yes-no", "given", "hidden"
ORDER = (BOUNDS, LEVELS, LABELS, PATIENT, CLINICAL, YES_NO, GIVEN, HIDDEN)
MERGE = "merge-rare"  # the option of the category-list tick: rare levels into OTHER
OTHER = "other"
MERGE_LABEL = f"Merge rare levels into '{OTHER}' (recommended)"

ASKS_HINT = "Read from your data: not public until you tick this."
FACTS_HINT = "Public facts, nothing read from your data: confirmed with the schema."

K = ColumnKind


@dataclass(frozen=True)
class Entry:
    """One column of a decision: what becomes public and (owner-only) what it does to data."""

    column: str
    public: str
    effect: str = ""


@dataclass(frozen=True)
class Decision:
    """One kind of decision in the owner's checklist."""

    key: str
    title: str
    entries: tuple[Entry, ...]
    asks: bool  # something here was read off the data: the owner's tick is needed
    dataset: str = ""

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(e.column for e in self.entries)

    @property
    def hint(self) -> str:
        return ASKS_HINT if self.asks else FACTS_HINT

    @property
    def token(self) -> str:
        """The tick's value: this kind and a digest of what it lists as public."""
        text = json.dumps([self.dataset, self.key, [[e.column, e.public] for e in self.entries]])
        return f"{self.key}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many.format(n=n)


TITLES = {
    BOUNDS: ("This bound read from the data becomes public",
             "These {n} bounds read from the data become public"),
    LEVELS: ("This category list read from the data becomes public",
             "These {n} category lists read from the data become public"),
    LABELS: ("Read this coded column with these labels",
             "Read these {n} coded columns with these labels"),
    CLINICAL: ("Accept the clinical default for this column",
               "Accept the clinical defaults for these {n} columns"),
    YES_NO: ("This column becomes public as yes/no", "These {n} columns become public as yes/no"),
    GIVEN: ("This column keeps the public metadata you set",
            "These {n} columns keep the public metadata you set"),
    HIDDEN: ("This column stays hidden from other roles",
             "These {n} columns stay hidden from other roles"),
}


def kind_of(spec: ColumnSpec) -> str:
    """Which decision a column needs (see the module docstring)."""
    if not spec.queryable:
        return HIDDEN
    if spec.derived_from_data:
        if spec.kind is K.CATEGORICAL and spec.categories and all(
                _labelled(c) for c in spec.categories):
            return LABELS
        return BOUNDS if spec.has_bounds else LEVELS
    if spec.kind is K.BOOLEAN:
        return YES_NO
    base = clinical_default(spec.name)
    if base is not None and (base.kind, base.lower, base.upper, base.categories) == (
            spec.kind, spec.lower, spec.upper, spec.categories):
        return CLINICAL
    return GIVEN


def _labelled(category: object) -> bool:
    return isinstance(category, str) and "=" in category and coded(category) is not None


def checklist(schema: Schema, review: DataReview | None) -> list[Decision]:
    """The decisions for ``schema``, in ORDER; the patient decision is always there."""
    groups: dict[str, list[ColumnSpec]] = {}
    for spec in schema.columns:
        groups.setdefault(kind_of(spec), []).append(spec)
    out = []
    for key in ORDER:
        if key == PATIENT:
            out.append(patient_decision(schema, review))
            continue
        specs = groups.get(key, [])
        if not specs:
            continue
        entries = tuple(_entry(key, s, review) for s in specs)
        out.append(Decision(key, _plural(len(specs), *TITLES[key]), entries,
                            any(s.derived_from_data for s in specs), schema.dataset))
    return out


def patient_decision(schema: Schema, review: DataReview | None) -> Decision:
    """Who is a patient, and k (flagged when it was read off the data)."""
    col, k = schema.patient_column, schema.max_rows_per_patient
    title, public = (("Each row is one patient", "one row per patient") if col is None else
                     (f"Rows per patient: at most {k} of each patient's rows are used",
                      f"'{col}' identifies a patient; k = {k}"))
    lines = review.unit_lines(schema) if review is not None else []
    entry = Entry(col or "", public, " ".join(lines))
    return Decision(PATIENT, title, (entry,), schema.patient_bound_derived, schema.dataset)


def waiting(schema: Schema, review: DataReview | None) -> list[Decision]:
    """The decisions that still need the owner's tick before the schema can be confirmed."""
    return [d for d in checklist(schema, review) if d.asks]


def apply_ticks(listed: list[Decision], edited: Schema, ticked: Iterable[object],
                review: DataReview | None) -> tuple[Schema, list[Decision]]:
    """``edited`` with the columns of each ticked kind confirmed; and the stale ticks.

    ``listed`` is the checklist the owner saw (of the stored schema); ``ticked`` the tick
    values sent back (untrusted: anything that is not a current token is ignored). A column
    the owner edited is already theirs; a ticked category list merges its rare levels into
    'other' when the merge option is ticked too. The patient decision is ticked on its own
    control (``patient_unit``).
    """
    sent = {str(t) for t in ticked if isinstance(t, str)}
    merge = MERGE in sent
    stale, names, schema = [], [], edited
    for decision in listed:
        if decision.key == PATIENT or not decision.asks:
            continue
        if decision.token in sent:
            for name in decision.columns:
                if name in schema and schema.column(name).derived_from_data:
                    names.append(name)
                    if decision.key == LEVELS and merge and review is not None:
                        schema = schema.with_column(merge_rare(schema.column(name), review))
        elif any(t.split(":", 1)[0] == decision.key for t in sent):
            stale.append(decision)
    return schema.confirm_columns(names), stale


def merge_rare(spec: ColumnSpec, review: DataReview) -> ColumnSpec:
    """The column with its rare levels replaced by one catch-all level 'other'."""
    rare = {lvl for lvl, _ in review.column(spec.name).rare_levels}
    if spec.kind is not K.CATEGORICAL or not rare:
        return spec
    kept = tuple(c for c in spec.categories or () if str(c) not in rare)
    if len(kept) == len(spec.categories or ()):
        return spec
    if OTHER not in {str(c) for c in kept}:
        kept = (*kept, OTHER)
    return replace(spec, categories=kept, other_level=OTHER)


def patient_unit(schema: Schema, column: str | None, k: object, k_confirmed: object,
                 review: DataReview | None) -> Schema:
    """The owner's unit of privacy: the patient column (None: one row = one patient) and k.

    A k the owner typed is theirs; a k left as proposed stays flagged as read off the data
    until the owner ticks it. Choosing another column proposes its own k.
    """
    if column is None:
        return replace(schema, patient_column=None, max_rows_per_patient=1,
                       patient_bound_derived=False)
    if column not in schema:
        raise SchemaError(f"The dataset has no column named '{column}'.")
    typed = None if k is None or str(k).strip() == "" else _whole(k)
    if column != schema.patient_column:
        proposed = review.proposed_bound(column) if review is not None else 1
        derived = typed is None or typed == schema.max_rows_per_patient
        k_new = proposed if derived else typed
    else:
        derived = schema.patient_bound_derived and typed in (None, schema.max_rows_per_patient)
        k_new = schema.max_rows_per_patient if typed is None else typed
    derived = derived and k_confirmed is not True
    return replace(schema, patient_column=column, max_rows_per_patient=k_new,
                   patient_bound_derived=derived)


def _whole(value: object) -> int:
    try:
        k = float(str(value).strip())
    except ValueError as exc:
        raise SchemaError(f"Rows per patient must be a whole number, not '{value}'.") from exc
    if not (math.isfinite(k) and k.is_integer() and k >= 1):
        raise SchemaError(f"Rows per patient must be a whole number of at least 1, not '{value}'.")
    return int(k)


# --- what each entry says ----------------------------------------------------------------
def public_text(spec: ColumnSpec) -> str:
    """The column's public metadata in words: bounds, bins, levels, codes read as missing."""
    parts = []
    unit = f" {spec.unit}" if spec.unit else ""
    if spec.kind is K.BOOLEAN:
        parts.append("yes / no")
    elif spec.has_bounds:
        text = f"{readable(spec.lower)} to {readable(spec.upper)}{unit}"
        if spec.kind is K.NUMERIC and spec.bin_width:
            text += f", bins of {readable(spec.bin_width)}"
        parts.append(text)
    if spec.categories and spec.kind is not K.BOOLEAN:
        label = "levels " if spec.kind is K.ORDINAL and spec.has_bounds else ""
        parts.append(label + ", ".join(_level(c) for c in spec.categories))
    if spec.missing_codes:
        parts.append(f"{', '.join(repr(c) for c in spec.missing_codes)} read as missing")
    return "; ".join(parts) or "no bounds or categories"


def _level(c: object) -> str:
    return readable(c) if isinstance(c, int | float) and not isinstance(c, bool) else str(c)


def _entry(key: str, spec: ColumnSpec, review: DataReview | None) -> Entry:
    if key == HIDDEN:
        return Entry(spec.name, "its name only", _hidden_reason(spec, review))
    if key == LEVELS and review is not None:  # as published with the merge ticked (default)
        return Entry(spec.name, public_text(merge_rare(spec, review)), _effect(key, spec, review))
    return Entry(spec.name, public_text(spec), _effect(key, spec, review))


def _hidden_reason(spec: ColumnSpec, review: DataReview | None) -> str:
    r = review.column(spec.name) if review is not None else None
    if spec.kind is K.DATE:
        seen = f" from {r.span[0]} to {r.span[1]}" if r is not None and r.span else ""
        return f"Dates{seen}: kept for you; dates are not queried."
    if r is not None and r.all_missing:
        return "Every value is missing."
    why = {K.IDENTIFIER: "An identifier", K.FREE_TEXT: "Free text or a person's name"}
    return f"{why.get(spec.kind, 'Marked as a direct identifier')}: never shown to other roles."


def _effect(key: str, spec: ColumnSpec, review: DataReview | None) -> str:
    """Owner-only facts: what the public metadata does to the values."""
    if review is None:
        return ""
    r = review.column(spec.name)
    parts = []
    if spec.has_bounds and spec.kind is not K.BOOLEAN:
        seen = f"Values {r.span[0]} to {r.span[1]}; " if r.span and r.span[0] != r.span[1] \
            else ""
        parts.append(f"{seen}clamped: {r.clamped_below} up to {readable(spec.lower)}, "
                     f"{r.clamped_above} down to {readable(spec.upper)}.")
    if r.rare_levels and key == LEVELS:
        levels = ", ".join(f"{lvl} ({n})" for lvl, n in r.rare_levels)
        parts.append(f"Rare (fewer than {review.rare_level_min} records): {levels}. Merged "
                     f"into '{OTHER}' while '{MERGE_LABEL}' is ticked; untick it to publish "
                     "them as they are.")
    if spec.derived_from_data and spec.description.startswith("Codes"):
        parts.append(spec.description)  # the coding convention used, or a call to name codes
    parts.extend(n for n in r.notes(review.rare_level_min) if not n.startswith("Rare levels"))
    return " ".join(parts)
