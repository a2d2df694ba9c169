"""Privacy and utility metrics of a DP copy against its original (seed 003 §2.1–2.4).

* **Privacy Match %** = (1 − m/n)·100: m cells of n equal to the original (numbers compared
  after rounding to ``decimals``). High: the copy differs from the original in most cells.
* **Privacy DigiMatch %**: per row, the digits of the shorter of |original| and |DP| (after
  rounding to ``decimals``, decimal point removed) are compared position by position with the
  leading digits of the other; k mismatches of m digits give 100·k/m; the metric is the mean
  over rows.
* **Privacy Error %**: mean over rows of |DP − original| / |original| · 100 (rows whose
  original is 0 have no relative error and are left out).

Beyond the paper: mean and standard deviation original vs DP, the Wasserstein and
Kolmogorov–Smirnov distances (scipy's definitions), category shares and their total
variation distance, and the difference of the correlation matrices. Every metric that
reads the original is the data owner's only; the DP side alone is what other roles may see.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

_POW10 = 10 ** np.arange(19, dtype=np.int64)


def _floats(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return values.astype(float, copy=False)          # already numbers: no copy
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float,
                                                                      na_value=np.nan)


def _pairs(original: Any, dp: Any) -> tuple[np.ndarray, np.ndarray]:
    """Numeric (original, DP) pairs where both are finite."""
    a, b = _floats(original), _floats(dp)
    ok = np.isfinite(a) & np.isfinite(b)
    return a[ok], b[ok]


def privacy_match(original: Any, dp: Any, *, decimals: int | None = None) -> float:
    """(1 − m/n)·100 over the rows whose original is present (NaN when there are none)."""
    a, b = pd.Series(original).reset_index(drop=True), pd.Series(dp).reset_index(drop=True)
    present = a.notna().to_numpy()
    if not present.any():
        return math.nan
    if decimals is not None:
        x, y = _floats(a), _floats(b)
        equal = np.round(x, decimals) == np.round(y, decimals)
    else:
        equal = (a.astype(object).to_numpy() == b.astype(object).to_numpy())
    m = int(np.count_nonzero(equal & present))
    return 100.0 * (1.0 - m / int(present.sum()))


def _digits(x: np.ndarray) -> np.ndarray:
    """Number of decimal digits of non-negative integers (0 has one digit)."""
    return np.maximum(np.searchsorted(_POW10, x, side="right"), 1)


def _leading(x: np.ndarray, digits: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The ``m`` leading digits of ``x`` (``digits`` long): divides only where it must."""
    out = x.copy()
    cut = digits > m
    out[cut] //= _POW10[(digits - m)[cut]]
    return out


def digimatch(original: Any, dp: Any, *, decimals: int = 0) -> float:
    """Mean over rows of 100·k/m (k of the shorter number's m digits differ), see module."""
    a, b = _pairs(original, dp)
    if a.size == 0:
        return math.nan
    scale = 10.0 ** decimals
    limit = float(_POW10[-1])
    ia = np.minimum(np.rint(np.abs(a) * scale), limit).astype(np.int64)
    ib = np.minimum(np.rint(np.abs(b) * scale), limit).astype(np.int64)
    la, lb = _digits(ia), _digits(ib)
    m = np.minimum(la, lb)
    ta, tb = _leading(ia, la, m), _leading(ib, lb, m)      # the m leading digits of each
    # both are below 10^m, so digits past the m-th are 0 on both sides and never differ
    top, width = max(int(ta.max()), int(tb.max())), int(m.max())
    k = np.zeros(a.size, dtype=np.int32)
    if top < 100_000:          # small numbers: each digit looked up, no division per row
        table = np.zeros((top + 1, width), dtype=np.int8)
        rest = np.arange(top + 1)
        for j in range(width):
            rest, table[:, j] = np.divmod(rest, 10)
        for j in range(width):
            k += table[ta, j] != table[tb, j]
    else:
        for _ in range(width):
            ta, da = np.divmod(ta, 10)
            tb, db = np.divmod(tb, 10)
            k += da != db
    return float(np.mean(100.0 * k / m))


def privacy_error(original: Any, dp: Any) -> float:
    """Mean |DP − original| / |original| · 100 over rows with a non-zero original."""
    a, b = _pairs(original, dp)
    nz = a != 0
    if not nz.any():
        return math.nan
    return float(np.mean(np.abs(b[nz] - a[nz]) / np.abs(a[nz]))) * 100.0


def cdf_distances(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(Wasserstein-1, Kolmogorov–Smirnov) between two samples from one sort of each.

    The definitions of ``scipy.stats.wasserstein_distance`` and ``ks_2samp``'s statistic
    (the area between and the largest gap of the empirical CDFs), computed together so a
    million-row column is sorted once, not four times; the tests check both against scipy.
    """
    joined = np.concatenate([np.sort(x), np.sort(y)])
    order = np.argsort(joined, kind="stable")       # merges the two sorted runs
    both = joined[order]
    from_x = np.cumsum(order < x.size)
    last = np.flatnonzero(np.r_[both[1:] != both[:-1], True])   # right end of each tie
    fx = from_x[last] / x.size
    fy = (last + 1 - from_x[last]) / y.size
    gap = np.abs(fx - fy)
    return float(np.sum(gap[:-1] * np.diff(both[last]))), float(gap.max())


def _moments(x: np.ndarray) -> tuple[float, float]:
    if x.size == 0:
        return math.nan, math.nan
    return float(np.mean(x)), float(np.std(x, ddof=1)) if x.size > 1 else math.nan


def category_codes(values: Any, categories: Sequence[Any]) -> np.ndarray:
    """Codes in the public list (−1: missing or not listed); text and numbers match as text."""
    s = pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):   # map its few categories, then gather
        table = np.append(category_codes(np.asarray(s.cat.categories, dtype=object),
                                         categories), -1)
        return table[s.cat.codes.to_numpy()]          # code −1 (missing) picks the last
    index = pd.Index(list(categories))
    same_kind = (s.dtype.kind in "iuf" and index.inferred_type in ("integer", "floating")) \
        or (s.dtype.kind == "b" and index.inferred_type == "boolean")
    if same_kind:
        codes = np.asarray(index.get_indexer(s.to_numpy()))     # numbers: no object copy
    else:
        codes = np.asarray(index.get_indexer(s.to_numpy(dtype=object)))
    if (codes < 0).any():   # e.g. "1" against 1: retry the unmatched as text
        text = pd.Index([str(c) for c in categories])
        miss = np.flatnonzero(codes < 0)
        codes[miss] = text.get_indexer(s.iloc[miss].astype(object).map(str).to_numpy())
        codes[miss[s.iloc[miss].isna().to_numpy()]] = -1
    return codes


def shares(values: Any, categories: Sequence[Any]) -> dict[str, float]:
    """Share of each public category among the present listed values (keys as text)."""
    codes = category_codes(values, categories)
    codes = codes[codes >= 0]
    counts = np.bincount(codes, minlength=len(categories))
    n = max(int(codes.size), 1)
    return {str(c): float(k) / n for c, k in zip(categories, counts, strict=True)}


@dataclass(frozen=True)
class ColumnMetrics:
    """One column's metrics; ``*_original`` and comparisons are owner only."""

    name: str
    kind: str                            # "numeric", "categorical" or "text"
    privacy_match: float = math.nan
    digimatch: float = math.nan
    privacy_error: float = math.nan
    mean_original: float = math.nan
    mean_dp: float = math.nan
    std_original: float = math.nan
    std_dp: float = math.nan
    wasserstein: float = math.nan
    ks: float = math.nan
    shares_original: Mapping[str, float] = field(default_factory=dict)
    shares_dp: Mapping[str, float] = field(default_factory=dict)
    total_variation: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def numeric_metrics(name: str, original: Any, dp: Any, *, decimals: int = 0,
                    paired: bool = True) -> ColumnMetrics:
    """Privacy and utility metrics of a numeric column (``paired=False``: the rows of the
    copy are not the original's, as in a synthetic table: the row-by-row metrics are NaN)."""
    a, b = _floats(original), _floats(dp)
    x, y = a[np.isfinite(a)], b[np.isfinite(b)]
    mo, so = _moments(x)
    md, sd = _moments(y)
    w1, ks = cdf_distances(x, y) if x.size and y.size else (math.nan, math.nan)
    by_row = {"privacy_match": privacy_match(a, b, decimals=decimals),
              "digimatch": digimatch(a, b, decimals=decimals),
              "privacy_error": privacy_error(a, b)} if paired else {}
    return ColumnMetrics(name, "numeric", **by_row, mean_original=mo, mean_dp=md,
                         std_original=so, std_dp=sd, wasserstein=w1, ks=ks)


def categorical_metrics(name: str, original: Any, dp: Any,
                        categories: Sequence[Any], *, paired: bool = True) -> ColumnMetrics:
    """Privacy Match (the paper's mismatch %), shares and their total variation distance."""
    ca, cb = category_codes(original, categories), category_codes(dp, categories)
    present = pd.Series(original).notna().to_numpy()
    match = math.nan
    if paired and present.any():
        match = 100.0 * (1.0 - np.count_nonzero((ca == cb) & (ca >= 0) & present)
                         / np.count_nonzero(present))
    k = len(categories)
    so = np.bincount(ca[ca >= 0], minlength=k) / max(np.count_nonzero(ca >= 0), 1)
    sd = np.bincount(cb[cb >= 0], minlength=k) / max(np.count_nonzero(cb >= 0), 1)
    keys = [str(c) for c in categories]
    return ColumnMetrics(name, "categorical", privacy_match=match,
                         shares_original=dict(zip(keys, so.tolist(), strict=True)),
                         shares_dp=dict(zip(keys, sd.tolist(), strict=True)),
                         total_variation=float(0.5 * np.abs(so - sd).sum()))


def text_metrics(name: str, original: Any, dp: Any) -> ColumnMetrics:
    """Masked or kept text: only the Privacy Match applies."""
    return ColumnMetrics(name, "text", privacy_match=privacy_match(original, dp))


def column_metrics(name: str, original: Any, dp: Any, *, kind: str,
                   categories: Sequence[Any] = (), decimals: int = 0,
                   paired: bool = True) -> ColumnMetrics:
    """Dispatch by ``kind``: "numeric", "categorical" or "text"."""
    if kind == "numeric":
        return numeric_metrics(name, original, dp, decimals=decimals, paired=paired)
    if kind == "categorical":
        return categorical_metrics(name, original, dp, categories, paired=paired)
    if not paired:
        return ColumnMetrics(name, "text")
    return text_metrics(name, original, dp)


def correlation(frame: pd.DataFrame) -> np.ndarray:
    """Pearson correlations of the columns (pairwise complete rows; NaN for a constant one)."""
    if frame.shape[1] == 0:
        return np.zeros((0, 0))
    arr = frame.to_numpy(dtype=float, na_value=np.nan)
    if np.isfinite(arr).all():
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.atleast_2d(np.corrcoef(arr, rowvar=False))
    return frame.astype(float).corr().to_numpy()


@dataclass(frozen=True)
class TableMetrics:
    """Every column's metrics and the correlation matrices of the numeric columns."""

    columns: Mapping[str, ColumnMetrics]
    corr_names: tuple[str, ...] = ()
    corr_original: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    corr_dp: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def _corr_diffs(self) -> np.ndarray:
        """The finite |Δ correlation| over pairs of distinct columns."""
        d = np.abs(self.corr_dp - self.corr_original)
        return d[~np.eye(d.shape[0], dtype=bool) & np.isfinite(d)]

    @property
    def corr_max_diff(self) -> float:
        """Largest |Δ correlation| over pairs of distinct columns (NaN with fewer than 2)."""
        vals = self._corr_diffs()
        return float(vals.max()) if vals.size else math.nan

    @property
    def corr_mean_diff(self) -> float:
        vals = self._corr_diffs()
        return float(vals.mean()) if vals.size else math.nan

    def overall(self, name: str) -> float:
        """Mean of one metric over the columns where it applies."""
        vals = [getattr(m, name) for m in self.columns.values()]
        vals = [v for v in vals if isinstance(v, float) and math.isfinite(v)]
        return float(np.mean(vals)) if vals else math.nan


def table_metrics(original: pd.DataFrame, dp: pd.DataFrame, kinds: Mapping[str, str], *,
                  categories: Mapping[str, Sequence[Any]] | None = None,
                  decimals: Mapping[str, int] | None = None,
                  paired: bool = True) -> TableMetrics:
    """Metrics of every column of ``dp`` (same names in ``original``) and the correlations;
    ``paired=False`` for a table whose rows are not the original's (synthetic)."""
    categories, decimals = categories or {}, decimals or {}
    cols = {n: column_metrics(n, original[n], dp[n], kind=kinds[n],
                              categories=categories.get(n, ()), decimals=decimals.get(n, 0),
                              paired=paired)
            for n in dp.columns}
    numeric = [n for n in dp.columns if kinds[n] == "numeric"]
    if len(numeric) < 2:
        return TableMetrics(cols)
    orig = original[numeric].apply(pd.to_numeric, errors="coerce")
    new = dp[numeric].apply(pd.to_numeric, errors="coerce")
    return TableMetrics(cols, tuple(numeric), correlation(orig), correlation(new))
