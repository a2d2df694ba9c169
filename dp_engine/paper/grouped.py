"""Per-group statistics from paper-mode noise: the computations behind Figures 2–4.

- Figure 2 (query 1): counts per (value, group) cell are computed on the raw data and
  those counts are the data noised by ``dp_calculate`` (int, fitted to their range).
- Figure 3 (query 2): every value is noised for a mean, then averaged per true group.
- Figure 4 (query 3, ``noise_groups=True``): the group labels are mapped to codes, noised
  (query 3, always fitted) and mapped back; the values are noised for a median; the
  median, q1 and q3 per noisy group feed a box plot.
- Query 4: every value noised for a variance, population variance (ddof 0) per group.

Honesty: unless ``noise_groups`` is set, group membership and therefore the group sizes
are exact, so ``counts`` is an un-noised statistic (owner-only), and ``effective_epsilon``
(the sum over the noised columns) only covers patients whose group does not change.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dp_engine.errors import DataTypeError, EmptyDataError
from dp_engine.paper.calc import dp_calculate
from dp_engine.paper.data import category_labels, encode, present, take
from dp_engine.paper.types import GroupedPaperResult, PaperResult, query_code
from dp_engine.rng import as_generator

_ALL = "all"


def _aligned(values: object, groups: object) -> tuple[object, object | None, int]:
    """Values and groups restricted to rows where both are present; (values, groups, dropped)."""
    keep = present(values)
    if groups is not None:
        gmask = present(groups)
        if gmask.size != keep.size:
            raise DataTypeError(
                f"values ({keep.size}) and groups ({gmask.size}) must have the same length."
            )
        keep &= gmask
    if not keep.any():
        raise EmptyDataError("No record has both a value and a group; nothing to analyse.")
    dropped = int(keep.size - keep.sum())
    return take(values, keep), (None if groups is None else take(groups, keep)), dropped


def _labels(groups: object | None, group_categories: object) -> np.ndarray:
    if groups is None:
        return np.asarray([_ALL], dtype=object)
    arr = np.empty(len(groups), dtype=object)  # type: ignore[arg-type]
    arr[:] = list(groups)  # type: ignore[call-overload]
    return category_labels(arr, group_categories)


def _codes(groups: object | None, labels: np.ndarray, n: int) -> np.ndarray:
    if groups is None:
        return np.zeros(n, dtype=np.intp)
    arr = np.empty(n, dtype=object)
    arr[:] = list(groups)  # type: ignore[call-overload]
    return encode(arr, labels).astype(np.intp)


def _per_group(
    codes: np.ndarray, vals: np.ndarray, k: int, code: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(statistic, counts, q1, q3) per group code 0..k-1; NaN where a group is empty."""
    grouped = pd.Series(vals).groupby(codes)
    counts = grouped.size().reindex(range(k), fill_value=0).to_numpy()
    q1 = q3 = None
    if code == 2:
        stat = grouped.mean()
    elif code == 4:
        stat = grouped.var(ddof=0)
    else:
        stat = grouped.median()
        q1 = grouped.quantile(0.25).reindex(range(k)).to_numpy(dtype=float)
        q3 = grouped.quantile(0.75).reindex(range(k)).to_numpy(dtype=float)
    return stat.reindex(range(k)).to_numpy(dtype=float), counts, q1, q3


def _counts_result(
    values: object,
    groups: object | None,
    noise_factor: int,
    data_type: object,
    is_range: bool,
    group_categories: object,
    rng: np.random.Generator,
    dropped: int,
    epsilons: object,
) -> GroupedPaperResult:
    """Figure 2: raw counts per (value, group) cell, then the counts are noised."""
    vlabels = _labels(values, None)
    glabels = _labels(groups, group_categories)
    n = len(values)  # type: ignore[arg-type]
    cell = _codes(values, vlabels, n) * glabels.size + _codes(groups, glabels, n)
    occupied, raw = np.unique(cell, return_counts=True)
    res = dp_calculate(
        raw,
        1,
        noise_factor,
        data_type or int,
        is_range,
        epsilons=epsilons,
        rng=rng,
        statistic="count",
    )
    noised = np.asarray(res.dp_data)
    keys = tuple(
        vlabels[c // glabels.size]
        if groups is None
        else (vlabels[c // glabels.size], glabels[c % glabels.size])
        for c in occupied.tolist()
    )
    return GroupedPaperResult(
        group_keys=keys,
        values=noised.astype(float),
        counts=noised,
        q1=None,
        q3=None,
        query_type=1,
        value_result=res,
        group_result=None,
        epsilon=res.epsilon,
        sensitivity=res.sensitivity,
        noise_percent=res.noise_percent,
        effective_epsilon=res.effective_epsilon,
        n_dropped=dropped,
    )


def grouped_statistic(
    values: object,
    groups: object,
    query_type: object,
    noise_factor: int,
    *,
    data_type: object = None,
    is_range: bool = True,
    noise_groups: bool = False,
    group_categories: object = None,
    epsilons: object = None,
    rng: np.random.Generator | None = None,
) -> GroupedPaperResult:
    """A statistic per group from per-record paper-mode noise (module docstring).

    ``groups`` may be None (one group, "all"); ``group_categories`` fixes the group order
    (and, with ``noise_groups``, the code order the noise moves along). Rows missing a value
    or a group are dropped and counted in ``n_dropped``. ``epsilons`` is the ε grid of
    every search (default ``DEFAULT_EPSILONS``).
    """
    code = query_code(query_type)
    gen = as_generator(rng)
    vals, grps, dropped = _aligned(values, groups)
    if code == 1:
        if noise_groups:
            raise DataTypeError(
                "noise_groups applies to record-level statistics (mean, median, variance); "
                "for counts the cells are computed first and the counts are noised."
            )
        return _counts_result(
            vals, grps, noise_factor, data_type, is_range, group_categories, gen, dropped, epsilons
        )
    labels = _labels(grps, group_categories)
    group_result: PaperResult | None = None
    if noise_groups and grps is not None:
        group_result = dp_calculate(
            grps,
            3,
            noise_factor,
            "str",
            True,
            epsilons=epsilons,
            rng=gen,
            categories=labels.tolist(),
        )
        noisy_groups = group_result.dp_data
    else:
        noisy_groups = grps
    value_result = dp_calculate(
        vals, code, noise_factor, data_type, is_range, epsilons=epsilons, rng=gen
    )
    noised = np.asarray(value_result.dp_data, dtype=float)
    codes = _codes(noisy_groups, labels, noised.size)
    stat, counts, q1, q3 = _per_group(codes, noised, labels.size, code)
    eff = value_result.effective_epsilon
    if group_result is not None:
        eff += group_result.effective_epsilon
    return GroupedPaperResult(
        group_keys=tuple(labels.tolist()),
        values=stat,
        counts=counts,
        q1=q1,
        q3=q3,
        query_type=code,
        value_result=value_result,
        group_result=group_result,
        epsilon=value_result.epsilon,
        sensitivity=value_result.sensitivity,
        noise_percent=value_result.noise_percent,
        effective_epsilon=eff,
        n_dropped=dropped,
    )
