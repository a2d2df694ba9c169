"""Per-record techniques of the release studio, one per column, vectorized.

Every technique perturbs each cell on its own, so a cell is ε-DP against a change of that
cell (local DP) and a record's loss is the sum of its columns' ε (``RecordCopy``):

* ``laplace``: value clamped to the public bounds, plus float-safe Laplace noise of scale
  Δ/ε. Δ is 1 (protects changes of at most one unit) or the public range (any change).
* ``bounded_laplace``: output kept inside the public bounds (Holohan et al. 2018) with the
  corrected scale, so it is ε-DP (the textbook Δ/ε scale is not once truncated).
* ``randomized_response`` (boolean) and ``exponential`` (categorical, utility = equality):
  the true category with probability e^ε / (e^ε + k − 1), another one uniformly otherwise.
  With the equality utility the exponential mechanism's normalizer is the same for every
  cell value, so P(r) ∝ exp(ε·u(x, r)) is already ε-DP: the factor 2 of the general
  mechanism (which covers normalizers that move) is not needed.
* ``mask``: random tokens of one fixed length (independent of the value: no length, no
  linkage between equal values); ``drop``: the column is left out. Both cost 0.
* ``keep``: the column as is — not private at all (owner only, flagged).

Missing cells are replaced before noising (numeric: the middle of the bounds; categories:
a uniform draw), so the output does not reveal which cells were missing. The row count is
exact: this is DP against *replacing* a patient, not against adding or removing one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import pandas as pd

from dp_engine.errors import DPError
from dp_engine.rng import RngLike, as_generator
from dp_engine.schema import NUMERIC_KINDS, ColumnKind, ColumnSpec, Schema
from dp_engine.sound.mechanisms import bounded_laplace, laplace

TOKEN_LENGTH = 8
"""Every masked cell is a token of exactly this many letters."""


class Technique(StrEnum):
    LAPLACE = "laplace"
    BOUNDED_LAPLACE = "bounded_laplace"
    RANDOMIZED_RESPONSE = "randomized_response"
    EXPONENTIAL = "exponential"
    MASK = "mask"
    DROP = "drop"
    KEEP = "keep"

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def numeric(self) -> bool:
        return self in (Technique.LAPLACE, Technique.BOUNDED_LAPLACE)

    @property
    def categorical(self) -> bool:
        return self in (Technique.RANDOMIZED_RESPONSE, Technique.EXPONENTIAL)

    @property
    def uses_epsilon(self) -> bool:
        return self.numeric or self.categorical


_LABELS = {
    Technique.LAPLACE: "Laplace",
    Technique.BOUNDED_LAPLACE: "Bounded Laplace",
    Technique.RANDOMIZED_RESPONSE: "Randomized response",
    Technique.EXPONENTIAL: "Exponential mechanism",
    Technique.MASK: "Mask (random tokens)",
    Technique.DROP: "Drop the column",
    Technique.KEEP: "Keep as is (not private)",
}


class Sensitivity(StrEnum):
    ONE = "one"        # protects changes of at most one unit
    RANGE = "range"    # the public range upper − lower: protects any change of the cell


@dataclass(frozen=True)
class ColumnChoice:
    """What to do with one column: technique, per-cell ε, sensitivity (numeric only)."""

    name: str
    technique: Technique
    epsilon: float | None = None
    sensitivity: Sensitivity = Sensitivity.RANGE

    def __post_init__(self) -> None:
        object.__setattr__(self, "technique", Technique(self.technique))
        object.__setattr__(self, "sensitivity", Sensitivity(self.sensitivity))

    @property
    def cell_epsilon(self) -> float:
        """ε of one cell: 0 for mask/drop, ∞ for keep."""
        if self.technique is Technique.KEEP:
            return math.inf
        if not self.technique.uses_epsilon:
            return 0.0
        return float(self.epsilon)  # type: ignore[arg-type]

    def with_epsilon(self, epsilon: float) -> ColumnChoice:
        if not self.technique.uses_epsilon:
            return self
        return ColumnChoice(self.name, self.technique, float(epsilon), self.sensitivity)


class ColumnProblemsError(DPError):
    """One or more columns cannot be released as asked; ``problems``: column -> message."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.problems.items()))


def _numeric_ok(spec: ColumnSpec) -> bool:
    return spec.kind in NUMERIC_KINDS


def _categories_ok(spec: ColumnSpec) -> bool:
    return spec.kind in (ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.ORDINAL)


def techniques_for(spec: ColumnSpec) -> list[Technique]:
    """Techniques that fit the column's kind (keep is always listed: the page gates it)."""
    out: list[Technique] = []
    if _numeric_ok(spec):
        out += [Technique.BOUNDED_LAPLACE, Technique.LAPLACE]
    if spec.kind is ColumnKind.BOOLEAN:
        out.append(Technique.RANDOMIZED_RESPONSE)
    if _categories_ok(spec) and spec.kind is not ColumnKind.BOOLEAN:
        out.append(Technique.EXPONENTIAL)
    return [*out, Technique.MASK, Technique.DROP, Technique.KEEP]


def default_technique(spec: ColumnSpec) -> Technique:
    """The paper's defaults by kind: bounded Laplace (numeric), randomized response
    (boolean), exponential (categorical, ordinal with categories), masking (the rest)."""
    if spec.kind is ColumnKind.BOOLEAN:
        return Technique.RANDOMIZED_RESPONSE
    if spec.kind is ColumnKind.CATEGORICAL or (spec.kind is ColumnKind.ORDINAL
                                               and spec.categories):
        return Technique.EXPONENTIAL
    if _numeric_ok(spec):
        return Technique.BOUNDED_LAPLACE
    return Technique.MASK


def _choice_problem(spec: ColumnSpec, choice: ColumnChoice) -> str | None:
    t = choice.technique
    if t not in techniques_for(spec):
        return (f"{t.label} does not fit a {spec.kind.value.replace('_', ' ')} column; "
                f"choose one of: {', '.join(x.label for x in techniques_for(spec))}.")
    if t.uses_epsilon:
        eps = choice.epsilon
        if eps is None or not isinstance(eps, int | float) or not math.isfinite(eps) or eps <= 0:
            return "ε must be a number greater than 0."
    if t.numeric:
        try:
            spec.bounds()
        except DPError:
            return "needs a public lower and upper bound in the dataset schema."
    if t.categorical and not _categories(spec):
        return "needs a public category list in the dataset schema."
    return None


def check_choices(schema: Schema, choices: Sequence[ColumnChoice]) -> dict[str, str]:
    """Problems found from public metadata only (column -> message a clinician can act on)."""
    problems: dict[str, str] = {}
    seen: set[str] = set()
    for choice in choices:
        if choice.name in seen:
            problems[choice.name] = "is listed twice."
            continue
        seen.add(choice.name)
        if choice.name not in schema:
            problems[choice.name] = "is not a column of this dataset."
            continue
        msg = _choice_problem(schema.column(choice.name), choice)
        if msg:
            problems[choice.name] = msg
    return problems


def check_data(frame: pd.DataFrame, choices: Sequence[ColumnChoice]) -> dict[str, str]:
    """Problems that need the data (owner only): a column with no value at all."""
    problems: dict[str, str] = {}
    for c in choices:
        if c.technique.uses_epsilon and c.name in frame and not frame[c.name].notna().any():
            problems[c.name] = ("has no value at all (every cell is missing): drop it or "
                                "mask it instead.")
    return problems


def _categories(spec: ColumnSpec) -> tuple:
    if spec.kind is ColumnKind.BOOLEAN:
        return tuple(spec.categories) if spec.categories else (False, True)
    return tuple(spec.categories or ())


def sensitivity_of(spec: ColumnSpec, choice: ColumnChoice) -> float:
    """Δ of a numeric column: 1, or the public range."""
    lo, hi = spec.bounds()
    return 1.0 if choice.sensitivity is Sensitivity.ONE else hi - lo


def _numeric(series: pd.Series, spec: ColumnSpec, choice: ColumnChoice,
             rng: np.random.Generator) -> np.ndarray:
    lo, hi = spec.bounds()
    x = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    x = np.where(np.isfinite(x), np.clip(x, lo, hi), (lo + hi) / 2.0)
    delta, eps = sensitivity_of(spec, choice), float(choice.epsilon)  # type: ignore[arg-type]
    if choice.technique is Technique.BOUNDED_LAPLACE:
        out = np.asarray(bounded_laplace(x, lo, hi, delta, eps, rng=rng), dtype=float)
    else:
        out = np.asarray(laplace(x, delta, eps, rng=rng), dtype=float)
    if spec.kind is ColumnKind.ORDINAL:  # post-processing: whole levels, inside the bounds
        out = np.rint(out)
        if choice.technique is Technique.BOUNDED_LAPLACE:
            out = np.clip(out, math.ceil(lo), math.floor(hi))
    return out


def category_codes(series: pd.Series, categories: Sequence) -> np.ndarray:
    """Codes in the public list; −1 where missing or not in the list."""
    index = pd.Index(list(categories))
    if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
        index = index.astype(str) if all(isinstance(c, str) for c in categories) else index
    return np.asarray(index.get_indexer(series.astype(object).to_numpy()), dtype=np.intp)


def k_ary_response(codes: np.ndarray, k: int, epsilon: float,
                   rng: np.random.Generator) -> np.ndarray:
    """k-ary randomized response on codes 0..k−1 (−1, missing: a uniform code first)."""
    codes = codes.copy()
    missing = codes < 0
    if missing.any():
        codes[missing] = rng.integers(0, k, size=int(missing.sum()))
    keep_p = 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))
    other = rng.integers(0, k - 1, size=codes.shape)
    other += other >= codes
    return np.where(rng.random(codes.shape) < keep_p, codes, other)


def _category_column(series: pd.Series, spec: ColumnSpec, choice: ColumnChoice,
                     rng: np.random.Generator) -> pd.Series | np.ndarray:
    cats = _categories(spec)
    out = k_ary_response(category_codes(series, cats), len(cats), float(choice.epsilon), rng)
    if spec.kind is ColumnKind.BOOLEAN and set(cats) == {False, True}:
        return np.asarray(cats, dtype=bool)[out]
    if all(isinstance(c, int | float) and not isinstance(c, bool) for c in cats):
        return np.asarray(cats)[out]
    return pd.Categorical.from_codes(out, categories=list(cats))


def mask_tokens(n: int, rng: np.random.Generator, length: int = TOKEN_LENGTH) -> np.ndarray:
    """n random upper-case tokens of exactly ``length`` letters (independent of any data)."""
    letters = rng.integers(65, 91, size=(n, length), dtype=np.uint8)
    return letters.view(f"S{length}").ravel().astype(f"U{length}")


def perturb(series: pd.Series, spec: ColumnSpec, choice: ColumnChoice,
            rng: np.random.Generator):
    """The DP column (array-like, same length), or None when the column is dropped."""
    t = choice.technique
    if t is Technique.DROP:
        return None
    if t is Technique.KEEP:
        return series.to_numpy()
    if t is Technique.MASK:
        return mask_tokens(len(series), rng)
    if t.numeric:
        return _numeric(series, spec, choice, rng)
    return _category_column(series, spec, choice, rng)


@dataclass(frozen=True, eq=False)
class RecordCopy:
    """A per-record DP copy: the table, each column's choice and the record's loss."""

    frame: pd.DataFrame
    choices: tuple[ColumnChoice, ...]
    record_epsilon: float                   # Σ per-cell ε over released DP columns (finite)
    kept: tuple[str, ...] = ()              # columns copied as is: not private
    dropped: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def record_epsilon(choices: Sequence[ColumnChoice]) -> float:
    """A record's loss from public choices: Σ per-cell ε (keep columns excluded: they are
    not private at all and flagged separately)."""
    return math.fsum(c.cell_epsilon for c in choices if c.technique is not Technique.KEEP)


def per_record_copy(frame: pd.DataFrame, schema: Schema, choices: Sequence[ColumnChoice], *,
                    rng: RngLike = None) -> RecordCopy:
    """The per-record DP copy of ``frame`` (only the chosen columns, in their order).

    Raises ColumnProblemsError (nothing computed) when a choice does not fit its column.
    """
    choices = tuple(choices)
    problems = check_choices(schema, choices) or check_data(frame, choices)
    if problems:
        raise ColumnProblemsError(problems)
    gen = as_generator(rng)
    out: dict[str, object] = {}
    for c in choices:
        col = perturb(frame[c.name], schema.column(c.name), c, gen)
        if col is not None:
            out[c.name] = col
    kept = tuple(c.name for c in choices if c.technique is Technique.KEEP)
    dropped = tuple(c.name for c in choices if c.technique is Technique.DROP)
    notes = ((f"Kept as is, NOT private: {', '.join(kept)}.",) if kept else ())
    return RecordCopy(pd.DataFrame(out, index=pd.RangeIndex(len(frame))), choices,
                      record_epsilon(choices), kept, dropped, notes)
