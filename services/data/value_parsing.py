"""Vectorized parsing of messy CSV cells into numbers, booleans, dates and categories.

Every parser works on the distinct values of a column (``pandas.factorize``) and maps the
result back, so a million rows with a few hundred distinct cells cost one hash pass.
Each returns a ``Parsed``: the values, how many non-missing cells could not be read (now
missing), and how many cells are missing in the result (counted from the codes, because a
missing-value scan of a million Python strings costs more than the parse).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

TRUE_TOKENS = frozenset({"true", "t", "yes", "y", "1", "1.0", "ja", "j", "wahr", "x"})
FALSE_TOKENS = frozenset({"false", "f", "no", "n", "0", "0.0", "nein", "falsch"})

# Cells read as missing besides pandas' defaults ("", "NA", "n/a", "N/A", "NaN", "null", ...).
EXTRA_NA = ("-", "--", "?", "n.a.", "N.A.", "na", "missing", ".", "NA_NA", "na_na")

# The same codes compared after trimming and lower-casing, so " NA ", "Na_NA" and cells of
# only spaces are missing too, whatever the reader did ("none" is a real category: not here).
MISSING_TOKENS = frozenset({
    "", "na", "n/a", "nan", "-nan", "null", "na_na", "<na>", "#n/a", "-", "--", ".", "?",
    "n.a.", "missing",
})

DATE_FORMATS = (
    "%d.%m.%Y", "%d.%m.%Y %H:%M", "%d.%m.%Y %H:%M:%S", "%d.%m.%y",
    "%d/%m/%Y", "%m/%d/%Y", "%d/%m/%Y %H:%M", "%m/%d/%Y %H:%M",
    "%Y/%m/%d", "%d-%m-%Y", "%d %b %Y", "%b %d, %Y", "%d %B %Y", "%B %d, %Y",
)

NS_MIN, NS_MAX = pd.Timestamp.min.ceil("D"), pd.Timestamp.max.floor("D")

# A cell or category written as a code with its label: "0_no", "1_type 1", "1 = male". The
# label holds a letter, so "2_5" or "10=20" are not read as labelled codes.
_CODED = re.compile(r"^\s*(?:(\d{1,3})\s*_|([^\s=]{1,12})\s*=)\s*(\S.*?)\s*$")
_LETTER = re.compile(r"[^\W\d_]")

_OPEN_ENDED = re.compile(r"^\s*(>=|<=|≥|≤|>|<)\s*([-+]?\d+(?:\.\d+)?)\s*$")
_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d+,\d+\s*$")


def coded(text: object) -> tuple[str, str] | None:
    """(code, label) of a value written as a code with its label ("0_no", "1 = male"), else None."""
    match = _CODED.match(str(text))
    if match is None or not _LETTER.search(match.group(3)):
        return None
    return match.group(1) or match.group(2), match.group(3)


def truth(text: object) -> bool | None:
    """True/False for a yes/no spelling ("yes", "0", "1_yes", "0 = no"), else None."""
    token = str(text).strip().lower()
    if token in TRUE_TOKENS:
        return True
    if token in FALSE_TOKENS:
        return False
    pair = coded(token)
    if pair is None:
        return None
    label = pair[1].lower()
    return True if label in TRUE_TOKENS else False if label in FALSE_TOKENS else None


@dataclass(frozen=True)
class Parsed:
    """Parsed values plus the counts the load report needs."""

    values: pd.Series
    bad: int = 0          # non-missing cells that could not be read (now missing)
    missing: int = 0      # missing cells in ``values``
    open_ended: int = 0   # cells such as ">3" read at their limit
    coded: int = 0        # cells equal to one of the column's missing-value codes (now missing)
    other: int = 0        # cells outside the category list read as the catch-all level
    levels: dict[str, int] | None = None  # cells per category (match_categories only)


def _code_numbers(codes: Sequence[str]) -> np.ndarray:
    nums = pd.to_numeric(pd.Series(list(codes), dtype=object), errors="coerce")
    return nums.dropna().to_numpy(dtype="float64")


class Distinct:
    """A column as codes into its distinct values (missing = code -1).

    Distinct values that mean "missing" (MISSING_TOKENS, or one of the column's own
    ``missing_codes``; text compared trimmed and case-insensitively, numbers by value) are
    recoded as missing; ``coded`` counts the cells a column's own codes turned missing.
    """

    def __init__(self, values: pd.Series, missing_codes: Sequence[str] = ()) -> None:
        self.index = values.index
        if isinstance(values.dtype, pd.CategoricalDtype):  # already coded by the CSV reader
            self.codes = values.cat.codes.to_numpy()
            self.uniques = pd.Index(values.cat.categories)
        else:
            self.codes, uniques = pd.factorize(values, use_na_sentinel=True)
            self.uniques = pd.Index(uniques)
        counts = np.bincount(self.codes.astype(np.intp) + 1, minlength=len(self.uniques) + 1)
        self.coded = 0
        if len(self.uniques):
            general, own = self._missing_uniques(missing_codes)
            drop = general | own
            if drop.any():
                self.coded = int(counts[1:][own & ~general].sum())
                safe = np.where(self.codes < 0, 0, self.codes)
                self.codes = np.where((self.codes >= 0) & drop[safe], -1, self.codes)
                counts = np.bincount(self.codes.astype(np.intp) + 1,
                                     minlength=len(self.uniques) + 1)
        self.absent = int(counts[0])
        self.counts = counts[1:]

    def _missing_uniques(self, missing_codes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct value: a general missing token; one of the column's own codes.

        Plain Python over the distinct values: they are few, and pandas' string methods cost
        more in fixed overhead than this whole pass.
        """
        lower = [t.lower() for t in self.text().tolist()]
        general = np.fromiter((t in MISSING_TOKENS for t in lower), bool, len(lower))
        if not missing_codes:
            return general, np.zeros(len(lower), dtype=bool)
        codes = {str(c).strip().lower() for c in missing_codes}
        own = np.fromiter((t in codes for t in lower), bool, len(lower))
        nums = _code_numbers(missing_codes)
        if nums.size:
            as_num = pd.to_numeric(pd.Series(lower, dtype=object), errors="coerce")
            own = own | np.isin(as_num.to_numpy(dtype="float64"), nums)
        return general, own

    @property
    def present(self) -> int:
        """Number of non-missing cells."""
        return int(self.codes.size - self.absent)

    def seen(self) -> pd.Index:
        """Distinct non-missing values that occur at least once."""
        return self.uniques[self.counts > 0]

    def text(self) -> pd.Series:
        """The distinct values as trimmed text (computed once)."""
        if getattr(self, "_text", None) is None:
            self._text = pd.Series(self.uniques, dtype=object).astype(str).str.strip()
        return self._text

    def cells(self, per_unique: np.ndarray) -> int:
        """Number of cells whose distinct value is flagged in ``per_unique``."""
        return int(self.counts[per_unique].sum()) if per_unique.size else 0

    def spread(self, parsed: np.ndarray, fill) -> np.ndarray:
        """Values of ``parsed`` at each cell; ``fill`` where the cell was missing."""
        if parsed.size == 0:
            return np.full(self.codes.size, fill, dtype=parsed.dtype)
        out = parsed.take(self.codes)  # a new array; code -1 picks the last, overwritten here
        out[self.codes < 0] = fill
        return out


def _is_plain(values: pd.Series, kind: str) -> bool:
    """A numpy (not categorical/object) column of the given dtype kind ('b' or numeric)."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype):
        return dtype.kind in kind
    return isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in kind and (
        not isinstance(dtype, pd.CategoricalDtype)
    )


def parse_numbers(values: pd.Series, missing_codes: Sequence[str] = ()) -> Parsed:
    """Float values (NaN = missing); text cells become NaN and are counted as bad.

    ``>3`` is read as 4 and ``<2`` as 1 for whole numbers (the nearest value inside the
    range), ``>=3``/``<=3`` as 3; ``3,5`` (decimal comma) as 3.5. Cells equal to one of
    ``missing_codes`` (``999``) are missing and counted as ``coded``.
    """
    if _is_plain(values, "biuf"):
        arr = values.to_numpy(dtype="float64", na_value=np.nan)
        arr = np.where(np.isfinite(arr), arr, np.nan)
        coded = 0
        nums = _code_numbers(missing_codes) if missing_codes else np.empty(0)
        if nums.size:
            hit = np.isin(arr, nums)
            coded = int(hit.sum())
            if coded:
                arr = np.where(hit, np.nan, arr)
        return Parsed(pd.Series(arr, index=values.index), 0, int(np.isnan(arr).sum()),
                      coded=coded)
    d = Distinct(values, missing_codes)
    text = d.text()
    parsed = pd.to_numeric(text, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    parsed = parsed.copy()
    open_unique = np.zeros(len(text), dtype=bool)
    for i in np.flatnonzero(np.isnan(parsed)):
        cell = text.iloc[i]
        match = _OPEN_ENDED.match(cell)
        if match:
            op, num = match.group(1), float(match.group(2))
            if op in (">", "<") and num.is_integer():
                num = num + 1 if op == ">" else num - 1
            parsed[i] = num
            open_unique[i] = True
        elif _DECIMAL_COMMA.match(cell):
            parsed[i] = float(cell.replace(",", "."))
    parsed[~np.isfinite(parsed)] = np.nan
    bad = d.cells(np.isnan(parsed))
    out = pd.Series(d.spread(parsed, np.nan), index=d.index)
    return Parsed(out, bad, d.absent + bad, d.cells(open_unique), coded=d.coded)


def parse_booleans(values: pd.Series, missing_codes: Sequence[str] = ()) -> Parsed:
    """Nullable booleans from yes/no, y/n, 1/0, true/false (any case) and labelled codes such
    as 0_no/1_yes; others become NA."""
    if _is_plain(values, "b") and isinstance(values.dtype, np.dtype):
        return Parsed(values.astype("boolean"), 0, 0)
    d = Distinct(values, missing_codes)
    read = [truth(t) for t in d.text()]
    truths = np.array([t is True for t in read], dtype=bool)
    bad = np.array([t is None for t in read], dtype=bool)
    if truths.size == 0:
        return Parsed(pd.Series(pd.array([None] * d.codes.size, dtype="boolean"),
                                index=d.index), 0, d.codes.size)
    mask = (d.codes < 0) | bad.take(d.codes)
    out = pd.Series(pd.arrays.BooleanArray(truths.take(d.codes), mask), index=d.index)
    n_bad = d.cells(bad)
    return Parsed(out, n_bad, d.absent + n_bad, coded=d.coded)


def _parse_date_strings(text: pd.Series) -> pd.Series:
    parsed = pd.to_datetime(text, format="ISO8601", errors="coerce")
    for fmt in DATE_FORMATS:
        todo = parsed.isna() & text.ne("")
        if not todo.any():
            break
        parsed = parsed.where(~todo, pd.to_datetime(text[todo], format=fmt, errors="coerce"))
    return parsed


def parse_dates(values: pd.Series, missing_codes: Sequence[str] = ()) -> Parsed:
    """datetime64 values from ISO, German (dd.mm.yyyy), day-first and month-first slashes."""
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        return Parsed(values, 0, int(values.isna().sum()))
    d = Distinct(values, missing_codes)
    parsed = _parse_date_strings(d.text())
    parsed = parsed.where((parsed >= NS_MIN) & (parsed <= NS_MAX))  # representable dates only
    arr = parsed.astype("datetime64[ns]").to_numpy()
    n_bad = d.cells(np.isnat(arr))
    out = pd.Series(d.spread(arr, np.datetime64("NaT")), index=d.index, dtype="datetime64[ns]")
    return Parsed(out, n_bad, d.absent + n_bad, coded=d.coded)


def date_share(uniques: pd.Index, limit: int = 50) -> float:
    """Share of (up to ``limit``) distinct non-missing values that read as dates."""
    uniques = uniques[:limit]
    if len(uniques) == 0:
        return 0.0
    text = pd.Series(uniques, dtype=object).astype(str).str.strip()
    if pd.to_numeric(text, errors="coerce").notna().mean() > 0.5:
        return 0.0  # plain numbers are not dates
    return float(_parse_date_strings(text).notna().mean())


def _category(cell: str, wanted: dict[str, str]) -> str | None:
    """The category a lower-cased cell reads as: itself, else its code or label ("1_male")."""
    found = wanted.get(cell)
    if found is not None:
        return found
    pair = coded(cell)
    if pair is None:
        return None
    return wanted.get(pair[0]) or wanted.get(pair[1])


def match_categories(
    values: pd.Series, categories: Sequence[object], missing_codes: Sequence[str] = (),
    other: str | None = None,
) -> Parsed:
    """String values equal to a public category (case and surrounding space ignored).

    A category written as a code with its label ("1 = male") also takes the cells holding its
    code ("1") or its label ("male"); a cell written so ("1_male") is read by its code or label
    when it is not itself a category. Cells outside the list are read as ``other`` when the
    column has a catch-all level (counted as ``other``), else they become NA and are counted
    as bad. ``levels`` holds the number of cells per category.
    """
    wanted = {str(c).strip().lower(): str(c) for c in categories}
    for c in categories:  # whole-number categories also match "7.0" / 7.0
        if isinstance(c, bool):
            continue
        try:
            number = float(str(c))
        except ValueError:
            continue
        if number.is_integer():
            wanted.setdefault(f"{number}", str(c))
    for c in categories:
        pair = coded(c)
        if pair is not None and not isinstance(c, bool):
            for part in pair:
                wanted.setdefault(part.lower(), str(c))
            if pair[0].isdigit():
                wanted.setdefault(f"{float(pair[0])}", str(c))
    d = Distinct(values, missing_codes)
    mapped = np.array([_category(t, wanted) for t in d.text().str.lower()], dtype=object)
    outside = np.array([m is None for m in mapped], dtype=bool)
    if mapped.size == 0:
        return Parsed(pd.Series(pd.array([None] * d.codes.size, dtype="str"), index=d.index),
                      0, d.codes.size, coded=d.coded, levels=dict.fromkeys(map(str, categories), 0))
    n_outside = d.cells(outside)
    if other is not None:
        mapped[outside] = other
        outside[:] = False
    levels = dict.fromkeys((str(c) for c in categories), 0)
    for level, count in zip(mapped, d.counts, strict=True):
        if level is not None and count:
            levels[level] += int(count)
    # a small string array of the distinct values, spread by codes (no per-cell validation)
    out = pd.Series(pd.array(mapped, dtype="str").take(d.codes, allow_fill=True), index=d.index)
    n_bad = 0 if other is not None else n_outside
    return Parsed(out, n_bad, d.absent + n_bad, coded=d.coded,
                  other=n_outside if other is not None else 0, levels=levels)
