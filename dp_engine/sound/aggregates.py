"""Aggregates: the sufficient statistics every sound-mode view reduces to.

A data source computes these where the data lives (pandas in memory, DuckDB, PostgreSQL,
Spark SQL); the engine only adds noise to them. The definitions below are exact, so every
backend must return the same integers (tests compare them bit for bit):

* **records kept**: a record counts only if its value is present (not NaN / NULL) and, when
  grouped, its group label is present (its *group code* is the label's position in the public
  ``group_keys``). Missing values are never clamped or imputed. A label outside a public list
  is missing too: the data source maps it so before aggregating (the in-memory loader does it
  on load, a SQL source in its query); the numpy reference below refuses such labels.
* ``CellCounts`` (histograms, DP counts, group sizes): records per (group, cell), int64,
  shape (groups, cells). Numeric bins: cell = min(max(#{edges[j] ≤ x} − 1, 0), bins − 1),
  i.e. values beyond the outer edges fall in the outer bins and a value equal to an inner
  edge falls in the bin to its right. Categorical bins: the position of the value's label in
  the public category list.
* ``MomentSums`` (means, variances): per group, the record count and the integer lattice sums
  S1 = Σ rint((clamp(x) − mid) · k1) and, for variances, S2 = Σ rint(((clamp(x) − mid)² − h²/2)
  · k2), where mid = (lower + upper)/2, h = (upper − lower)/2, k1 = 1/step1 and k2 = 1/step2 are
  powers of two (``lattice_plan``), clamp(x) = min(max(x, lower), upper), rint rounds half to
  even, and every operation is IEEE double precision in exactly this order. Each term is an
  integer of magnitude ≤ 2^22, so the sums are exact in any order for n < 2^31.
* ``CandidateCounts`` (quantiles): per group, counts over c + 1 cells of
  cell(x) = min(max(floor((clamp(x) − lower) · s), 0), c − 1) + 1 with s = (c − 1)/(upper − lower)
  (cell 0 stays empty: it stands for "below the first candidate").

Added for the unit of privacy (the definitions above are unchanged): every aggregate carries
``contribution`` k, the most rows one patient may have in it (1 = one row per patient, the
default). With patient ids and a bound k, the reference functions first keep at most k rows
per patient (``bound_contributions``), chosen by a seeded hash of the patient's own id and
row (its position among that patient's rows), so the choice for one patient never depends on
any other patient; the releases then scale every sensitivity by k.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from dp_engine.errors import DataTypeError, InvalidBoundsError
from dp_engine.sound.mechanisms import CHUNK
from dp_engine.sound.validation import (
    _numeric_array,
    category_codes,
    check_bounds,
    check_same_length,
    public_index,
)

SUM_BITS = 22  # fixed-point steps per half range; n·2^22 < 2^53 keeps sums exact
MAX_RECORDS = 2**31


@dataclass(frozen=True)
class CellCounts:
    """Records per (group, cell); one row when ungrouped."""

    counts: np.ndarray          # int64, shape (groups, cells)
    contribution: int = 1       # most rows one patient has in these counts


@dataclass(frozen=True)
class MomentSums:
    """Per group: record count and exact lattice sums S1 (and S2 for variances)."""

    lower: float
    upper: float
    count: np.ndarray           # float64 holding integers, shape (groups,)
    s1: np.ndarray              # lattice units of step ``lattice_plan(...)[0]["sum"]``
    s2: np.ndarray | None = None  # lattice units of step ``...["sumsq"]``; None for a mean
    contribution: int = 1       # most rows one patient has in these sums

    @property
    def squares(self) -> bool:
        return self.s2 is not None


@dataclass(frozen=True)
class CandidateCounts:
    """Per group, records per quantile-candidate cell (c + 1 cells, see the module doc)."""

    lower: float
    upper: float
    n_candidates: int
    counts: np.ndarray          # int64, shape (groups, n_candidates + 1)
    contribution: int = 1       # most rows one patient has in these counts


def cell_counts(values: Any, bins: Any, *, groups: Any = None,
                group_keys: Sequence[Any] | None = None, patients: Any = None,
                max_rows_per_patient: int | None = None, bound_seed: int = 0) -> CellCounts:
    """Reference (numpy) ``CellCounts``; ``bins``: numeric edges ndarray or public categories.

    With ``patients`` (one id per row) and ``max_rows_per_patient`` k, at most k rows per
    patient are kept first (``bound_contributions``) and the counts carry contribution k.
    """
    values, groups, k = _bounded(values, groups, patients, max_rows_per_patient, bound_seed)
    kind, spec, nb = _bins(bins)
    keys = None if group_keys is None else _keys(group_keys)
    gcodes = None if keys is None else _group_codes(values, groups, keys)
    return CellCounts(_cell_counts(values, kind, spec, nb, gcodes, len(keys or [0])), k)


def moment_sums(values: Any, lower: float, upper: float, *, squares: bool, groups: Any = None,
                group_keys: Sequence[Any] | None = None, patients: Any = None,
                max_rows_per_patient: int | None = None, bound_seed: int = 0) -> MomentSums:
    """Reference (numpy) ``MomentSums`` of values clamped to the public [lower, upper]."""
    values, groups, k = _bounded(values, groups, patients, max_rows_per_patient, bound_seed)
    lower, upper = check_bounds(lower, upper)
    keys = None if group_keys is None else _keys(group_keys)
    gcodes = None if keys is None else _group_codes(values, groups, keys)
    x, gcodes = _numeric_with_groups(values, gcodes)
    totals, _, _ = _sums(x, gcodes, len(keys or [0]), lower, upper, squares)
    return MomentSums(lower, upper, totals["count"], totals["sum"], totals.get("sumsq"), k)


def candidate_counts(values: Any, lower: float, upper: float, n_candidates: int, *,
                     groups: Any = None, group_keys: Sequence[Any] | None = None,
                     patients: Any = None, max_rows_per_patient: int | None = None,
                     bound_seed: int = 0) -> CandidateCounts:
    """Reference (numpy) ``CandidateCounts`` on the uniform grid of ``n_candidates`` points."""
    values, groups, k = _bounded(values, groups, patients, max_rows_per_patient, bound_seed)
    lower, upper = check_bounds(lower, upper)
    c = int(n_candidates)
    keys = None if group_keys is None else _keys(group_keys)
    gcodes = None if keys is None else _group_codes(values, groups, keys)
    x, gcodes = _numeric_with_groups(values, gcodes)
    scale = (c - 1) / (upper - lower)

    def index(block: np.ndarray) -> np.ndarray:
        """1 + number of candidates ≤ x (uniform grid: arithmetic, not searchsorted)."""
        pos = np.clip(block, lower, upper)
        pos -= lower
        pos *= scale
        idx = pos.astype(np.intp)  # truncation = floor, pos ≥ 0
        np.clip(idx, 0, c - 1, out=idx)
        idx += 1
        return idx

    counts = _chunked_bincount(x, gcodes, c + 1, len(keys or [0]), index)
    return CandidateCounts(lower, upper, c, counts, k)


def coarsen(cands: CandidateCounts, n_candidates: int) -> CandidateCounts:
    """The exact counts on a coarser grid that keeps every r-th candidate.

    Needs (c − 1) divisible by (n_candidates − 1): each coarse cell is the union of r fine
    cells, so the result equals ``candidate_counts`` on the coarse grid bit for bit.
    """
    c, c2 = cands.n_candidates, int(n_candidates)
    if c2 == c:
        return cands
    if c2 < 2 or (c - 1) % (c2 - 1):
        raise DataTypeError(
            f"A grid of {c} candidates can only be coarsened to n with (n − 1) dividing {c - 1}."
        )
    r = (c - 1) // (c2 - 1)
    fine = cands.counts
    inner = fine[:, 1:c].reshape(fine.shape[0], c2 - 1, r).sum(axis=2)
    counts = np.concatenate([fine[:, :1], inner, fine[:, c:]], axis=1)
    return CandidateCounts(cands.lower, cands.upper, c2, counts, cands.contribution)


def repeated(agg: CellCounts | MomentSums | CandidateCounts,
             times: int) -> CellCounts | MomentSums | CandidateCounts:
    """The aggregates of the same table with every row (every patient) ``times`` times.

    Every aggregate is a sum over rows, so this is each sum times ``times``, exactly as
    computing on the repeated table would give; the contribution bound is unchanged (the
    copies are other patients). A simulated preview stands for n̂ records this way while
    drawing only n̂ / ``times`` of them.
    """
    k = int(times)
    if k < 1:
        raise DataTypeError(f"A table can be repeated 1 or more times, not {times}.")
    if k == 1:
        return agg
    if isinstance(agg, MomentSums):
        return replace(agg, count=agg.count * k, s1=agg.s1 * k,
                       s2=None if agg.s2 is None else agg.s2 * k)
    return replace(agg, counts=agg.counts * k)


def bound_contributions(patients: Any, max_rows: int, *, seed: int = 0) -> np.ndarray:
    """Rows kept (bool mask) when each patient may contribute at most ``max_rows`` rows.

    Each row gets the key hash(seed, patient id, its position among that patient's rows);
    a patient's ``max_rows`` rows with the smallest keys are kept. The key of a row depends
    on its own patient only, so adding or removing another patient never changes which rows
    of this one are kept: neighbours differ by at most k rows of one patient. Rows without a
    patient id are dropped (they cannot be bounded). Reproducible for a fixed seed.
    """
    k = _check_k(max_rows)
    ids = pd.Series(np.asarray(patients, dtype=object) if not isinstance(patients, pd.Series)
                    else patients.to_numpy(dtype=object))
    present = ids.notna().to_numpy()
    text = ids.where(ids.notna(), "").astype(str)
    occurrence = text.groupby(text.to_numpy(), sort=False).cumcount().to_numpy()
    key = pd.util.hash_pandas_object(
        pd.DataFrame({"id": text.to_numpy(), "row": occurrence}), index=False,
        hash_key=f"{int(seed) % 10**16:016d}",
    ).to_numpy()
    codes, _ = pd.factorize(text.to_numpy())
    order = np.lexsort((occurrence, key, codes))         # by patient, then key, then position
    rank = np.empty(order.size, dtype=np.int64)
    sorted_codes = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, order.size]))
    rank[order] = np.arange(order.size) - first
    return present & (rank < k)


def _check_k(max_rows: Any) -> int:
    if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)) or max_rows < 1:
        raise DataTypeError(
            f"The most rows per patient must be a whole number ≥ 1 (got {max_rows!r})."
        )
    return int(max_rows)


def _take(values: Any, mask: np.ndarray) -> Any:
    if isinstance(values, (pd.Series, pd.Index)):
        return pd.Series(values).iloc[np.flatnonzero(mask)].reset_index(drop=True)
    arr = np.asarray(values) if not isinstance(values, list) else np.asarray(values, dtype=object)
    return arr[mask]


def _bounded(values, groups, patients, max_rows, seed) -> tuple[Any, Any, int]:
    """(values, groups, k) after keeping at most k rows per patient (k = 1: no patients)."""
    if patients is None and max_rows is None:
        return values, groups, 1
    if patients is None or max_rows is None:
        raise DataTypeError(
            "Bounding each patient's rows needs both the patient column and the most rows "
            "per patient; set both in the dataset schema."
        )
    check_same_length(values, patients)
    keep = bound_contributions(patients, max_rows, seed=seed)
    groups = None if groups is None else _take(groups, keep)
    return _take(values, keep), groups, _check_k(max_rows)


# ---------------------------------------------------------------- helpers


def _fixed_grid(half_range: float) -> float:
    """Power-of-two step with half_range/step ≤ 2^SUM_BITS."""
    return 2.0 ** math.ceil(math.log2(half_range) - SUM_BITS)


def _present_count(values: Any) -> int:
    """Number of non-missing entries of any 1-D input."""
    if isinstance(values, (pd.Series, pd.Index)):
        return int(values.notna().sum())
    arr = np.ravel(np.asarray(values))
    if arr.dtype.kind in "biuUS":
        return arr.size
    if arr.dtype.kind in "fc":
        if arr.size and not np.isnan(arr.min()):  # one reduction: nothing is missing
            return arr.size
        return int(arr.size - np.count_nonzero(np.isnan(arr)))
    return int(pd.Series(arr).notna().sum())


def _group_codes(values: Any, groups: Any, group_keys: Sequence[Any]) -> np.ndarray:
    """Group code per record (−1 where the group is missing)."""
    if np.ndim(values) != 1 or np.ndim(groups) != 1:
        raise DataTypeError("Values and group labels must be one-dimensional columns.")
    check_same_length(values, groups)
    return category_codes(groups, group_keys, "The group labels")


def _numeric_with_groups(values: Any, gcodes: np.ndarray | None) -> tuple:
    """Non-missing float values and their group codes (None when ungrouped)."""
    x = np.ravel(_numeric_array(values, "The values"))
    if gcodes is None and x.size and not np.isnan(x.min()):
        keep = None  # one reduction shows there is nothing to drop
    else:
        keep = ~np.isnan(x)
        if gcodes is not None:
            keep &= gcodes >= 0
    if keep is not None and not keep.all():
        x = x[keep]
        gcodes = None if gcodes is None else gcodes[keep]
    if x.size >= MAX_RECORDS:
        raise DataTypeError("More than 2^31 records: split the data set to compute exact sums.")
    return x, gcodes


def _bins(bins: Any) -> tuple[str, Any, int]:
    """('edges', edges array, n_bins) for a numeric ndarray, else ('categories', Index, k)."""
    if isinstance(bins, np.ndarray) and bins.dtype.kind in "iuf":
        edges = bins.astype(float)
        if edges.ndim != 1 or edges.size < 2 or not np.isfinite(edges).all():
            raise InvalidBoundsError("Histogram edges must be at least two finite numbers.")
        if not (np.diff(edges) > 0).all():
            raise InvalidBoundsError("Histogram edges must be strictly increasing.")
        return "edges", edges, edges.size - 1
    index = public_index(bins)
    return "categories", index, len(index)


def _chunked_bincount(x, gcodes, cells: int, n_groups: int, index) -> np.ndarray:
    """Counts per (group, cell), where ``index`` maps a block of x to cell indices.

    Works block by block (CHUNK records), so no n-sized temporary is created.
    """
    total = np.zeros(n_groups * cells, dtype=np.int64)
    for start in range(0, len(x), CHUNK):
        idx = index(x[start : start + CHUNK])
        if gcodes is not None:
            idx += gcodes[start : start + CHUNK] * cells
        total += np.bincount(idx, minlength=n_groups * cells)
    return total.reshape(n_groups, cells)


def _edge_index(edges: np.ndarray):
    """Map a block of values to bin indices (outer bins take values beyond the edges).

    Equal-width edges use arithmetic plus an exact fix-up against the edges (as
    numpy's histogram does), otherwise searchsorted; both put a value equal to an
    inner edge in the bin to its right.
    """
    nb = edges.size - 1
    first, last = float(edges[0]), float(edges[-1])
    widths = np.diff(edges)
    if not np.allclose(widths, widths[0], rtol=1e-9, atol=0):

        def by_search(block: np.ndarray) -> np.ndarray:
            idx = np.searchsorted(edges, block, side="right")
            idx -= 1
            np.clip(idx, 0, nb - 1, out=idx)
            return idx

        return by_search
    factor = nb / (last - first)

    def by_arithmetic(block: np.ndarray) -> np.ndarray:
        inside = np.clip(block, first, last)
        pos = inside - first
        pos *= factor
        idx = pos.astype(np.intp)
        np.clip(idx, 0, nb - 1, out=idx)
        idx -= inside < edges[idx]  # float error put it one bin too far right
        idx += (inside >= edges[idx + 1]) & (idx < nb - 1)  # ... or one too far left
        return idx

    return by_arithmetic


def _cell_counts(values: Any, kind: str, spec: Any, nb: int, gcodes, n_groups: int):
    """Histogram counts, shape (groups, bins); values outside the edges go to the outer bins."""
    if kind == "edges":
        x, gcodes = _numeric_with_groups(values, gcodes)

        index = _edge_index(spec)

    else:
        x = category_codes(values, spec)
        keep = x >= 0
        if gcodes is not None:
            keep &= gcodes >= 0
        if not keep.all():
            x = x[keep]
            gcodes = None if gcodes is None else gcodes[keep]

        def index(block: np.ndarray) -> np.ndarray:
            return block.copy()

    return _chunked_bincount(x, gcodes, nb, n_groups, index)


def _keys(group_keys: Sequence[Any]) -> list[Any]:
    return list(public_index(group_keys))


def lattice_plan(lower: float, upper: float, squares: bool) -> tuple[dict, dict]:
    """Lattice step and sensitivity (in lattice units) of each moment component.

    Count: step 1, Δ 1. Centred sum: step 2^k with half/2^k ≤ 2^22, Δ = ⌈half/step⌉ + 1
    (the +1 absorbs a last-bit overshoot of the clamped, centred value). The centred
    squares (x − mid)² − h²/2 lie in ±h²/2 and get their own step the same way.
    """
    half = (upper - lower) / 2.0
    grid = {"count": 1.0, "sum": _fixed_grid(half)}
    sens = {"count": 1.0, "sum": math.ceil(half / grid["sum"]) + 1.0}
    if squares:
        grid["sumsq"] = _fixed_grid(half * half / 2.0)
        sens["sumsq"] = math.ceil(half * half / 2.0 / grid["sumsq"]) + 1.0
    return grid, sens


def _sums(x, gcodes, n_groups, lower, upper, squares: bool) -> tuple[dict, dict, dict]:
    """Exact lattice sums: count, Σ(x − mid), and optionally Σ((x − mid)² − h²/2).

    Returns (totals in lattice units, lattice step per component, sensitivity in
    lattice units per component). Works in blocks: no n-sized temporaries.
    """
    mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
    grid, sens = lattice_plan(lower, upper, squares)

    scale1 = 1.0 / grid["sum"]
    scale2 = 1.0 / grid["sumsq"] if squares else 0.0
    shift2 = half * half / 2.0
    n_out = 1 if gcodes is None else n_groups
    totals = {"sum": np.zeros(n_out), "sumsq": np.zeros(n_out)}
    centred, work = np.empty(min(x.size, CHUNK)), np.empty(min(x.size, CHUNK))

    def add(name: str, w: np.ndarray, start: int) -> None:
        np.rint(w, out=w)  # the record's lattice value: |·| ≤ sensitivity in lattice units
        if gcodes is None:
            totals[name] += w.sum()  # integers below 2^53: exact in any order
        else:
            totals[name] += np.bincount(
                gcodes[start : start + CHUNK], weights=w, minlength=n_groups
            )

    # Clamping is the identity when every value is inside the bounds, so skipping it
    # then leaves each record's lattice value (a fixed function of that record) unchanged.
    inside = x.size == 0 or (lower <= x.min() and x.max() <= upper)
    for start in range(0, x.size, CHUNK):  # blocks: exact integer sums, cache-sized buffers
        block = x[start : start + CHUNK]
        c, w = centred[: block.size], work[: block.size]
        src = block if inside else np.clip(block, lower, upper, out=c)
        np.subtract(src, mid, out=c)  # c = clamp(x) − mid (one rounding)
        np.multiply(c, scale1, out=w)  # exact: scale1 is a power of two
        add("sum", w, start)
        if squares:
            np.multiply(c, c, out=w)
            w -= shift2
            w *= scale2
            add("sumsq", w, start)
    if not squares:
        del totals["sumsq"]
    counts = np.array([x.size]) if gcodes is None else np.bincount(gcodes, minlength=n_groups)
    totals["count"] = counts.astype(float)
    return totals, grid, sens


