"""Propose a schema for a new file: kinds inferred, public clinical defaults where recognised.

Where a column is recognised (age, PI-RADS, Gleason, PSA, ...) its bounds are public clinical
facts and are not flagged — unless they would clamp more than 1 % of the values (another
scale, e.g. Gleason 2-10): then the column is proposed from the data and the owner is asked.
Everything else that is read off the data (min/max bounds, the category list, a ``999``
missing-value code, the rows-per-patient bound, code labels) is flagged ``derived_from_data``
— not private — until the owner confirms it. Constant and empty columns are kept.

What real exports taught: yes/no spellings include labelled codes (``0_no``/``1_yes``); sex and
survival status coded 1/2 are two labelled levels (ISO/IEC 5218; 1 = censored, 2 = event), not
an ordinal 1-2; a column named like an id with a handful of values (a test type) is a
category, not an identifier; sites, clinics and centres are categories (their names are not
people's names) and integer site codes are codes, not numbers. The proposal is never confirmed.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd

from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from services.data.limits import CLAMP_ASK_SHARE, MAX_PROPOSED_LEVELS
from services.data.patients import (
    best_repeated,
    candidates,
    is_patient_name,
    patient_stats,
    propose_bound,
)
from services.data.value_parsing import Distinct, coded, date_share, parse_numbers, truth

K = ColumnKind
R = ColumnRole

# Public clinical facts, keyed by the column name with case and punctuation removed.
_AGE = ColumnSpec("", K.NUMERIC, R.QUASI_IDENTIFIER, "Age", "years", 0, 110, 5,
                  description="Human age range (clinical default).")
_PIRADS = ColumnSpec("", K.ORDINAL, R.SENSITIVE, "PI-RADS score", "", 1, 5, 1, (1, 2, 3, 4, 5),
                     description="PI-RADS assessment scale 1-5 (clinical default).")
_GLEASON = ColumnSpec("", K.ORDINAL, R.SENSITIVE, "Gleason score", "", 6, 10, 1,
                      (6, 7, 8, 9, 10), description="Gleason sum 6-10 (clinical default).")
_ISUP = ColumnSpec("", K.ORDINAL, R.SENSITIVE, "ISUP grade group", "", 1, 5, 1, (1, 2, 3, 4, 5),
                   description="ISUP grade group 1-5 (clinical default).")
_PSA = ColumnSpec("", K.NUMERIC, R.SENSITIVE, "PSA", "ng/mL", 0, 100, 5,
                  description="PSA clamped to 0-100 ng/mL (clinical default).")
_VOLUME = ColumnSpec("", K.NUMERIC, R.SENSITIVE, "Prostate volume", "mL", 0, 250, 10,
                     description="Prostate volume 0-250 mL (clinical default).")
_LESIONS = ColumnSpec("", K.NUMERIC, R.SENSITIVE, "Number of lesions", "lesions", 0, 10, 1,
                      description="Lesion count 0-10 (clinical default).")
_BMI = ColumnSpec("", K.NUMERIC, R.QUASI_IDENTIFIER, "BMI", "kg/m²", 10, 60, 2,
                  description="Body-mass index 10-60 (clinical default).")
_PROSTATITIS = ColumnSpec("", K.CATEGORICAL, R.SENSITIVE, "Prostatitis",
                          categories=("n", "chr", "y", "acute", "acute on chronic"),
                          description="PI-RADS report template categories (clinical default).")

CLINICAL_DEFAULTS: dict[str, ColumnSpec] = {
    **dict.fromkeys(("age", "ageyears", "patientage", "ageatmri", "alter"), _AGE),
    **dict.fromkeys(("pirads", "piradsscore", "piradsv2", "piradsv21"), _PIRADS),
    **dict.fromkeys(("gleason", "gleasonscore", "gleasonsum"), _GLEASON),
    **dict.fromkeys(("isup", "isupgrade", "gradegroup", "isupgradegroup"), _ISUP),
    **dict.fromkeys(("psa", "psangml", "psavalue", "psalevel"), _PSA),
    **dict.fromkeys(("prostatevolume", "volume", "volumeml"), _VOLUME),
    **dict.fromkeys(("numberoflesions", "lesions", "lesioncount", "nlesions"), _LESIONS),
    "bmi": _BMI,
    "prostatitis": _PROSTATITIS,
}

_ID_TOKENS = {"id", "mrn", "uuid", "pid", "pseudonym"}
# contact and civil-status data: hidden whatever the values look like
_PERSONAL_TOKENS = {"ssn", "email", "phone", "address", "insurance", "dob", "birthdate", "zip",
                    "postcode"}
_NAME_TOKENS = {"name", "physician", "doctor", "surname", "firstname", "arzt", "radiologist"}
_TEXT_TOKENS = {"comment", "comments", "note", "notes", "remark", "remarks", "text", "freetext"}
_QI_TOKENS = {"sex", "gender", "year", "ethnicity", "race", "postcode", "zip", "birth"}
# places, not people: categories even when named "clinic_name" or "site_id"
_SITE_TOKENS = {"site", "institution", "institute", "inst", "centre", "center", "hospital",
                "clinic", "ward", "department", "dept", "hosp", "region", "country", "practice"}
# integer columns named so hold codes, not quantities ("inst" is R's lung-cancer institution)
_CODE_TOKENS = _SITE_TOKENS | {"code"}
_SEX_TOKENS = {"sex", "gender", "geschlecht"}
_EVENT_TOKENS = {"status", "event", "dead", "death", "died", "fustat", "censor", "censored"}
# Public coding conventions for whole-number codes: (name tokens, code -> label, source).
_CONVENTIONS = (
    (_SEX_TOKENS, {0: "not known", 1: "male", 2: "female", 9: "not applicable"},
     "the ISO/IEC 5218 sex codes"),
    (_EVENT_TOKENS, {1: "censored", 2: "event"},
     "the survival-analysis coding (1 = censored, 2 = event)"),
)
_SENTINELS = (9.0, 99.0, 999.0, 9999.0, 99999.0, 999999.0)

PROPOSED_NOTE = "Proposed automatically"
MATCH_SHARE = 0.9        # share of cells that must read as numbers/dates to pick that kind
MAX_ORDINAL_LEVELS = 10  # whole numbers with at most this many levels are proposed as ordinal
HANDFUL = 12             # an id-named column with at most this many values is a category
HANDFUL_REPEATS = 4      # ... when its values repeat on average at least this often


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def clinical_default(name: str) -> ColumnSpec | None:
    """The recognised public default for a column name (any case or punctuation), or None."""
    base = CLINICAL_DEFAULTS.get(_key(name))
    if base is None:
        return None
    return ColumnSpec(name, base.kind, base.role, base.label, base.unit, base.lower, base.upper,
                      base.bin_width, base.categories, False, base.description)


def clamp_counts(values: np.ndarray, lower: float, upper: float) -> tuple[int, int]:
    """How many values lie below ``lower`` and above ``upper`` (NaN ignored)."""
    with np.errstate(invalid="ignore"):
        return int((values < lower).sum()), int((values > upper).sum())


def would_ask(below: int, above: int, present: int) -> bool:
    """True when a default's bounds would clamp more than CLAMP_ASK_SHARE of the values."""
    return present > 0 and (below + above) > CLAMP_ASK_SHARE * present


def _tokens(name: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return {t for t in re.split(r"[^a-z0-9]+", spaced.lower()) if t}


def nice_width(span: float, bins: int = 10, whole: bool = False) -> float:
    """A round histogram width (1, 2, 2.5 or 5 times a power of ten) near span / bins.

    ``whole``: the values are whole numbers (years, days): a whole width, at least 1.
    """
    if not (span > 0 and math.isfinite(span)):
        return 1.0
    raw = span / bins
    power = 10.0 ** math.floor(math.log10(raw))
    width = 10.0 * power
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= step * power and not (whole and step == 2.5 and power < 10):
            width = step * power
            break
    return max(1.0, float(round(width))) if whole and width < 10 else width


def _clinical(name: str, numeric: bool, uniques: pd.Index,
              values: np.ndarray | None) -> ColumnSpec | None:
    """The public default for a recognised column whose values fit it, else None.

    A numeric default whose bounds would clamp more than 1 % of the values is not proposed.
    """
    base = clinical_default(name)
    if base is None or numeric != (base.kind is not K.CATEGORICAL):
        return None
    if base.categories and not numeric:
        known = {str(c).lower() for c in base.categories}
        if not {str(u).strip().lower() for u in uniques} <= known:
            return None
    if numeric and values is not None and base.has_bounds:
        below, above = clamp_counts(values, *base.bounds())
        if would_ask(below, above, int(np.count_nonzero(~np.isnan(values)))):
            return None
    return base


def _sentinel(values: np.ndarray) -> float | None:
    """A 999-style code: an all-nines extreme far beyond every other value, else None."""
    finite = values[~np.isnan(values)]
    if finite.size < 2:
        return None
    hi, lo = float(finite.max()), float(finite.min())
    if hi in _SENTINELS:
        rest = finite[finite != hi]
        if rest.size and rest.max() < hi / 2:
            return hi
    if -lo in _SENTINELS:
        rest = finite[finite != lo]
        if rest.size and rest.min() >= 0:
            return lo
    return None


def _numeric_spec(name: str, values: np.ndarray, role: ColumnRole) -> ColumnSpec:
    """Bounds (and levels, for a few whole numbers) read from the data's minimum and maximum.

    Whole numbers (years, days) get whole bounds and bin widths, so a year reads 2009 to 2012.
    """
    finite = values[~np.isnan(values)]
    lo, hi = float(finite.min()), float(finite.max())
    levels = np.unique(finite)
    whole = bool(np.all(np.mod(levels, 1) == 0))
    if whole and len(levels) == 1:  # constant: kept, no bounds to invent (lower == upper)
        return ColumnSpec(name, K.ORDINAL, role, categories=(int(levels[0]),),
                          derived_from_data=True,
                          description="One level proposed from the data; no bounds.")
    if whole and len(levels) <= MAX_ORDINAL_LEVELS:
        cats = tuple(int(v) for v in levels)
        return ColumnSpec(name, K.ORDINAL, role, lower=lo, upper=hi, bin_width=1,
                          categories=cats, derived_from_data=True,
                          description="Levels and bounds proposed from the data.")
    width = nice_width(hi - lo, whole=whole)
    try:
        lower, upper = math.floor(lo / width) * width, math.ceil(hi / width) * width
    except OverflowError:  # absurd magnitudes: keep the raw extremes
        lower, upper = lo, hi
    if not (math.isfinite(lower) and math.isfinite(upper)):
        lower, upper = lo, hi
    if upper <= lower:
        upper = lower + width
    return ColumnSpec(name, K.NUMERIC, role, lower=lower, upper=upper, bin_width=width,
                      derived_from_data=True,
                      description="Bounds proposed from the data's minimum and maximum.")


def _code_spec(name: str, finite: np.ndarray) -> ColumnSpec:
    """Integer codes of a site, centre or department: categories, never means."""
    levels = np.unique(finite)
    if len(levels) > MAX_PROPOSED_LEVELS:
        return ColumnSpec(name, K.IDENTIFIER, R.DIRECT_IDENTIFIER,
                          description=f"A code with more than {MAX_PROPOSED_LEVELS} values: "
                                      "treated as an identifier.")
    return ColumnSpec(name, K.CATEGORICAL, R.QUASI_IDENTIFIER,
                      categories=tuple(str(int(v)) for v in levels), derived_from_data=True,
                      description="Codes (site, centre, ...): categories proposed from the data.")


def _coded_levels(name: str, levels: np.ndarray, tokens: set[str],
                  role: ColumnRole) -> ColumnSpec | None:
    """Whole-number codes of two kinds (1/2, or a sex column): labelled levels, not a scale.

    Labels come from a public convention the column's name points to (sex: ISO/IEC 5218;
    survival status: 1 = censored, 2 = event); without one the codes stay as they are and
    the owner is asked to name them. Flagged either way: the owner checks the coding.
    """
    codes = sorted(int(v) for v in levels)
    for words, labels, source in _CONVENTIONS:
        if tokens & words and set(codes) <= set(labels) and {1, 2} <= set(codes):
            return ColumnSpec(name, K.CATEGORICAL, role,
                              categories=tuple(f"{c} = {labels[c]}" for c in codes),
                              derived_from_data=True,
                              description=f"Codes read with {source}: check that your export "
                                          "uses them.")
    if codes == [1, 2] or (tokens & _SEX_TOKENS and len(codes) <= 3):
        shown = ", ".join(str(c) for c in codes)
        return ColumnSpec(name, K.CATEGORICAL, role, categories=tuple(str(c) for c in codes),
                          derived_from_data=True,
                          description=f"Codes {shown} without labels: name them by typing "
                                      f"'{codes[0]} = …; {codes[1]} = …' as its categories.")
    return None


def _is_boolean(col: pd.Series, uniques: pd.Index, tokens: set[str]) -> bool:
    """Yes/no spellings (yes/no, 0/1, true/false, 0_no/1_yes); never a sex column's codes."""
    if pd.api.types.is_bool_dtype(col.dtype):
        return True
    if not 1 <= len(uniques) <= 2 or tokens & _SEX_TOKENS:
        return False
    text = {str(u).strip().lower() for u in uniques}
    if text <= {"1", "1.0"} or text <= {"0", "0.0"}:
        return False  # a constant 0 or 1 is more often a count than a yes/no
    return all(truth(t) is not None for t in text)


def _handful(col: pd.Series) -> bool:
    """A few distinct values, each on several rows: a type or a group, never an identifier.

    The first rows decide most columns (an id has many values early) without a full pass.
    """
    if col.iloc[:5000].nunique(dropna=True) > HANDFUL:
        return False
    distinct = int(col.nunique(dropna=True))
    return distinct <= HANDFUL and int(col.notna().sum()) >= HANDFUL_REPEATS * distinct


def propose_column(name: str, col: pd.Series) -> ColumnSpec:
    """Kind, role, bounds or categories for one raw column (see module docstring)."""
    tokens = _tokens(name)
    site = bool(tokens & _SITE_TOKENS)
    role = R.QUASI_IDENTIFIER if tokens & (_QI_TOKENS | _SITE_TOKENS) else R.OTHER
    named_id = bool(tokens & _ID_TOKENS) or is_patient_name(name)
    if tokens & _PERSONAL_TOKENS or (named_id and not site and not _handful(col)):
        return ColumnSpec(name, K.IDENTIFIER, R.DIRECT_IDENTIFIER,
                          description="Identifier: never shown to non-owners.")
    if tokens & _NAME_TOKENS and not site:
        return ColumnSpec(name, K.FREE_TEXT, R.DIRECT_IDENTIFIER,
                          description="Names a person: never shown to non-owners.")
    if _is_plain_number(col):
        values = col.to_numpy(dtype="float64", na_value=np.nan)
        finite = values[np.isfinite(values)]
        n_present, uniques, bad = finite.size, pd.Index(pd.unique(finite)), 0
    else:
        distinct = Distinct(col)
        n_present, uniques = distinct.present, distinct.seen()
        values, bad = None, None
    if n_present == 0:
        return ColumnSpec(name, K.FREE_TEXT, R.OTHER, description="Empty column.")
    if _is_boolean(col, uniques, tokens):
        return ColumnSpec(name, K.BOOLEAN, role, categories=(False, True),
                          description="Yes/no values.")
    if values is None:
        parsed = parse_numbers(col)
        values, bad = parsed.values.to_numpy(dtype="float64", na_value=np.nan), parsed.bad
    numeric = bad <= (1 - MATCH_SHARE) * n_present and not np.isnan(values).all()
    code = _sentinel(values) if numeric else None
    if code is None:
        return _propose_read(name, values, uniques, n_present, numeric, tokens, role)
    hit = values == code
    values = np.where(hit, np.nan, values)
    as_numbers = pd.to_numeric(pd.Series(uniques, dtype=object).astype(str), errors="coerce")
    uniques = uniques[as_numbers.to_numpy() != code]
    spec = _propose_read(name, values, uniques, n_present - int(hit.sum()), numeric, tokens,
                         role)
    return replace(spec, missing_codes=(f"{code:g}",), derived_from_data=True,
                   description=f"{spec.description} '{code:g}' read as missing (proposed from "
                               "the data).".strip())


def _propose_read(name: str, values: np.ndarray, uniques: pd.Index, n_present: int,
                  numeric: bool, tokens: set[str], role: ColumnRole) -> ColumnSpec:
    """The proposal once the cells are read as numbers (``values``) where they can be."""
    clinical = _clinical(name, numeric, uniques, values if numeric else None)
    if clinical is not None:
        return clinical
    if numeric:
        finite = values[~np.isnan(values)]
        whole = bool(np.all(np.mod(finite, 1) == 0))
        if whole and tokens & _CODE_TOKENS:
            return _code_spec(name, finite)
        levels = np.unique(finite)
        labelled = (_coded_levels(name, levels, tokens, role) if whole and len(levels) >= 2
                    else None)
        if labelled is not None:
            return labelled
        if whole and len(uniques) == n_present and n_present >= 50:
            return ColumnSpec(name, K.IDENTIFIER, R.DIRECT_IDENTIFIER,
                              description="Every value is different: treated as an identifier.")
        return _numeric_spec(name, values, role)
    if tokens & _TEXT_TOKENS:
        return ColumnSpec(name, K.FREE_TEXT, R.DIRECT_IDENTIFIER,
                          description="Free text may name people: never shown to non-owners.")
    if date_share(uniques) >= MATCH_SHARE:
        return ColumnSpec(name, K.DATE, role)
    return _text_spec(name, n_present, uniques, role, bool(tokens & _SITE_TOKENS))


def _is_plain_number(col: pd.Series) -> bool:
    dtype = col.dtype
    return (
        not isinstance(dtype, pd.CategoricalDtype)
        and pd.api.types.is_numeric_dtype(dtype)
        and not pd.api.types.is_bool_dtype(dtype)
    )


def _text_spec(name: str, n: int, uniques: pd.Index, role: ColumnRole,
               site: bool = False) -> ColumnSpec:
    """Categories when the texts are few (sites and clinics: up to MAX_PROPOSED_LEVELS)."""
    most = MAX_PROPOSED_LEVELS if site else max(12, min(50, 0.2 * n))
    if len(uniques) <= most:
        by_lower: dict[str, str] = {}
        for u in uniques:
            by_lower.setdefault(str(u).strip().lower(), str(u).strip())
        cats = tuple(sorted(by_lower.values(), key=_level_order))
        what = "Sites" if site else "Categories"
        return ColumnSpec(name, K.CATEGORICAL, role, categories=cats, derived_from_data=True,
                          description=f"{what} proposed from the data.")
    if len(uniques) == n and n >= 50 and not any(" " in str(u) for u in uniques):
        return ColumnSpec(name, K.IDENTIFIER, R.DIRECT_IDENTIFIER,
                          description="Every value is different: treated as an identifier.")
    return ColumnSpec(name, K.FREE_TEXT, R.DIRECT_IDENTIFIER,
                      description="Many different texts: free text, never shown to non-owners.")


def _level_order(text: str) -> tuple:
    """Labelled codes by their code ("2_x" before "10_y"), other texts alphabetically."""
    pair = coded(text)
    if pair is not None and pair[0].isdigit():
        return (0, int(pair[0]), text.lower())
    return (1, 0, text.lower())


def propose_schema(frame: pd.DataFrame, dataset: str) -> Schema:
    """An unconfirmed schema for ``frame``; data-derived bounds and categories are flagged."""
    columns = tuple(propose_column(str(name), frame[name]) for name in frame.columns)
    flagged = sum(c.derived_from_data for c in columns)
    notes = (
        f"{PROPOSED_NOTE}; {flagged} column(s) have bounds or categories derived from "
        "the data — not private until you confirm or edit them.",
    )
    schema = Schema(dataset=dataset, columns=columns, confirmed=False, title=dataset,
                    notes=notes)
    return propose_patient_unit(frame, schema)


def propose_patient_unit(frame: pd.DataFrame, schema: Schema) -> Schema:
    """When an identifier column repeats (rows are not patients): it, and k from the data."""
    order = candidates(schema)
    repeated = best_repeated(patient_stats(frame, order), order, min_patients=HANDFUL + 1)
    if repeated is None:
        return schema
    return replace(schema, patient_column=repeated.column,
                   max_rows_per_patient=propose_bound(repeated), patient_bound_derived=True)
