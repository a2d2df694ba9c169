"""Risk and utility of an anonymized table: k, l-diversity, uniqueness, SSE/SST, IL1s,
cluster statistics, and how far the distance-to-centroid distribution moved."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dp_engine.anonymize.distances import MappedAttribute, _as_number
from dp_engine.anonymize.divergence import kl_divergence, wasserstein
from dp_engine.anonymize.table import MappedTable
from dp_engine.anonymize.vq import medoid_codes


@dataclass
class AnonymizationReport:
    """Figures shown next to an anonymized release (all computed on the owner's side)."""

    k_target: int
    k_achieved: int
    n_records: int
    n_groups: int
    n_classes: int
    unique_before: float  # share of records whose quasi-identifier combination is unique
    unique_after: float
    l_diversity: dict[str, int] = field(default_factory=dict)  # distinct released values
    l_diversity_true: dict[str, int] = field(default_factory=dict)  # distinct true values
    sse_sst_pct: float = float("nan")
    il1s: float = float("nan")
    cluster_stats: pd.DataFrame = field(default_factory=pd.DataFrame)
    distance_kl: dict[str, float] = field(default_factory=dict)
    distance_wasserstein: dict[str, float] = field(default_factory=dict)

    @property
    def k_anonymous(self) -> bool:
        return self.k_achieved >= self.k_target


def class_sizes(frame: pd.DataFrame, qis: Sequence[str]) -> pd.Series:
    """Size of the equivalence class (same quasi-identifier values, missing included) per row."""
    key = frame[list(qis)].astype(object).where(frame[list(qis)].notna(), "\0<missing>")
    return key.groupby(list(qis), dropna=False, sort=False)[list(qis)[0]].transform("size")


def _class_ids(frame: pd.DataFrame, qis: Sequence[str]) -> np.ndarray:
    key = frame[list(qis)].astype(object).where(frame[list(qis)].notna(), "\0<missing>")
    return key.groupby(list(qis), dropna=False, sort=False).ngroup().to_numpy()


def _ordered_pairs(
    original: pd.DataFrame, released: pd.DataFrame, attrs: Sequence[MappedAttribute]
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    out = []
    for a in attrs:
        if a.kind.ordered:
            out.append(
                (
                    a.name,
                    _as_number(original[a.name], a.kind, a.name),
                    _as_number(released[a.name], a.kind, a.name),
                )
            )
    return out


def _sse_il1(pairs: list[tuple[str, np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """SSE/SST in % and IL1s on the z-scored ordered quasi-identifiers (missing skipped)."""
    sse = sst = il1 = 0.0
    count = 0
    for _, x, y in pairs:
        ok = ~np.isnan(x)
        sd = float(np.std(x[ok])) if ok.any() else 0.0
        if sd == 0:
            continue
        both = ok & ~np.isnan(y)
        sse += float(np.sum(((x[both] - y[both]) / sd) ** 2))
        sst += float(np.sum(((x[ok] - x[ok].mean()) / sd) ** 2))
        il1 += float(np.sum(np.abs(x[both] - y[both]) / (np.sqrt(2) * sd)))
        count += x.size
    if sst == 0:
        return float("nan"), float("nan")
    return 100.0 * sse / sst, il1 / count


def _group_moments(v: np.ndarray, groups: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-group mean and population variance of ``v`` (missing values skipped)."""
    ok = ~np.isnan(v)
    n = np.bincount(groups[ok], minlength=g)
    s1 = np.bincount(groups[ok], weights=v[ok], minlength=g)
    s2 = np.bincount(groups[ok], weights=v[ok] ** 2, minlength=g)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, s1 / np.maximum(n, 1), np.nan)
        var = np.where(n > 0, np.maximum(s2 / np.maximum(n, 1) - mean**2, 0.0), np.nan)
    return mean, var


def _cluster_stats(
    pairs: list[tuple[str, np.ndarray, np.ndarray]], groups: np.ndarray
) -> pd.DataFrame:
    """Per numeric column: group means and within-group variances, before vs after.

    Group figures are weighted by group size; the mean shift is in standard deviations.
    """
    rows = []
    g = int(groups.max()) + 1 if groups.size else 0
    w = np.bincount(groups, minlength=g) / max(groups.size, 1)
    for name, x, y in pairs:
        if np.isnan(x).all() or np.isnan(y).all():
            continue  # no known value on one side: nothing to compare
        mx, vx = _group_moments(x, groups, g)
        my, vy = _group_moments(y, groups, g)
        sd = float(np.nanstd(x)) or 1.0
        rows.append(
            {
                "column": name,
                "mean before": float(np.nanmean(x)),
                "mean after": float(np.nanmean(y)),
                "variance before": float(np.nanvar(x)),
                "variance after": float(np.nanvar(y)),
                "group mean shift (sd)": float(np.nansum(w * np.abs(my - mx)) / sd),
                "within-group variance before": float(np.nansum(w * vx)),
                "within-group variance after": float(np.nansum(w * vy)),
            }
        )
    return pd.DataFrame(rows)


def _released_distance(a: MappedAttribute, values: pd.Series, centre: np.ndarray) -> np.ndarray:
    if a.kind.ordered:
        return np.abs(a.coords_of_values(values) - a.coord[centre])
    return a.distance(a.codes_of_values(values), centre)


def distance_shift(
    table: MappedTable, released: pd.DataFrame, groups: np.ndarray
) -> tuple[float, float]:
    """KL and Wasserstein between distances to the group centroid before and after (pooled).

    The centroid is the group's Eq. 3 medoid of the original values; distances are the summed
    mapped distances over the table's attributes.
    """
    attrs = [a for a in table.attrs if not a.constant]
    if not attrs:
        return 0.0, 0.0
    g = int(groups.max()) + 1
    sub = MappedTable(attrs, table.scaling, table.target_mean)
    codes = sub.codes()
    centre = medoid_codes(sub, codes, groups, g)[groups]
    before = sub.distances(codes, centre).sum(axis=1)
    after = np.zeros(before.size)
    for j, a in enumerate(attrs):
        after += _released_distance(a, released[a.name], centre[:, j])
    return kl_divergence(before, after), wasserstein(before, after)


def _l_diversity(classes: np.ndarray, values: pd.Series) -> int:
    """Smallest number of distinct values (missing counts as one) within a class."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    pairs = np.unique(classes.astype(np.int64) * (len(uniques) + 1) + codes)
    return int(np.bincount(pairs // (len(uniques) + 1)).min())


def build_report(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qis: Sequence[str],
    sensitive: Sequence[str],
    groups: np.ndarray,
    k: int,
    qi_table: MappedTable,
    s_table: MappedTable | None,
) -> AnonymizationReport:
    """All report figures for one anonymization."""
    qis = list(qis)
    after_sizes = class_sizes(released, qis)
    before_sizes = class_sizes(original, qis)
    classes = _class_ids(released, qis)
    pairs = _ordered_pairs(original, released, qi_table.attrs)
    sse, il1 = _sse_il1(pairs)
    kl, w1 = {}, {}
    kl["quasi-identifiers"], w1["quasi-identifiers"] = distance_shift(qi_table, released, groups)
    l_rel, l_true = {}, {}
    stat_pairs = list(pairs)
    if s_table is not None:
        kl["sensitive"], w1["sensitive"] = distance_shift(s_table, released, groups)
        stat_pairs += _ordered_pairs(original, released, s_table.attrs)
        for col in sensitive:
            l_rel[col] = _l_diversity(classes, released[col])
            l_true[col] = _l_diversity(classes, original[col])
    return AnonymizationReport(
        k_target=int(k),
        k_achieved=int(after_sizes.min()),
        n_records=len(original),
        n_groups=int(groups.max()) + 1,
        n_classes=int(classes.max()) + 1,
        unique_before=float((before_sizes == 1).mean()),
        unique_after=float((after_sizes == 1).mean()),
        l_diversity=l_rel,
        l_diversity_true=l_true,
        sse_sst_pct=sse,
        il1s=il1,
        cluster_stats=_cluster_stats(stat_pairs, groups),
        distance_kl=kl,
        distance_wasserstein=w1,
    )
