"""The paper's vector-quantization steps: medoid centroids (Eq. 3), the cluster an outlier
joins (Eq. 4), and how its values are changed (Eq. 5 with strategies (a), (b), (c))."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from dp_engine.anonymize.distances import AttributeKind, MappedAttribute
from dp_engine.anonymize.divergence import kl_divergence
from dp_engine.anonymize.table import MappedTable
from dp_engine.rng import RngLike, as_generator


class OutlierStrategy(StrEnum):
    """How an outlier's far attribute gets its new value (paper §4.1)."""

    NOISE = "noise"  # (a) centroid + noise drawn from members' deviations, KL-checked
    CENTROID = "centroid"  # (b) the centroid's value
    MEMBER = "member"  # (c) the value of a random member


def group_bounds(labels: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, starts, sizes): records sorted by label, where each group starts, its size."""
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return order, starts, sizes


def _medoid_ordered(a: MappedAttribute, col: np.ndarray, labels: np.ndarray, g: int) -> np.ndarray:
    order = np.lexsort((a.coord[col], labels))
    sizes = np.bincount(labels, minlength=g)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return col[order[starts + (sizes - 1) // 2]]


def _medoid_nominal(a: MappedAttribute, col: np.ndarray, labels: np.ndarray, g: int) -> np.ndarray:
    v = a.n_values
    keys, counts = np.unique(labels * v + col, return_counts=True)
    lab, code = keys // v, keys % v
    order = np.lexsort((code, -counts, lab))
    first = np.ones(order.size, dtype=bool)
    first[1:] = lab[order][1:] != lab[order][:-1]
    out = np.zeros(g, dtype=np.int64)
    out[lab[order][first]] = code[order][first]
    return out


def _medoid_generic(a: MappedAttribute, col: np.ndarray, labels: np.ndarray, g: int) -> np.ndarray:
    order, starts, sizes = group_bounds(labels, g)
    out = np.zeros(g, dtype=np.int64)
    for grp in range(g):
        members = col[order[starts[grp] : starts[grp] + sizes[grp]]]
        uniq, cnt = np.unique(members, return_counts=True)
        score = a.distance(uniq[:, None], uniq[None, :]) @ cnt
        out[grp] = uniq[int(np.argmin(score))]
    return out


def medoid_codes(
    table: MappedTable, codes: np.ndarray, labels: np.ndarray, n_groups: int
) -> np.ndarray:
    """Eq. 3: per group and attribute, the member value minimizing the summed distance.

    Ordered kinds: the lower median (in mapped order); nominal: the most frequent value
    (smallest code on ties); hierarchical: exhaustive over the group's distinct codes.
    """
    cols = []
    for j, a in enumerate(table.attrs):
        col = codes[:, j]
        if a.kind.ordered:
            cols.append(_medoid_ordered(a, col, labels, n_groups))
        elif a.kind is AttributeKind.NOMINAL:
            cols.append(_medoid_nominal(a, col, labels, n_groups))
        else:
            cols.append(_medoid_generic(a, col, labels, n_groups))
    if not cols:
        return np.zeros((n_groups, 0), dtype=np.int64)
    return np.column_stack(cols)


def nearest_cluster(table: MappedTable, out_codes: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Eq. 4: index of the centroid minimizing the summed mapped distance (first on ties)."""
    if out_codes.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    if all(a.kind.ordered for a in table.attrs) and table.attrs:

        def coords(c: np.ndarray) -> np.ndarray:
            return np.column_stack([a.coord[c[:, j]] for j, a in enumerate(table.attrs)])

        from scipy.spatial import cKDTree  # here: scipy's bulk is not loaded at app start
        _, idx = cKDTree(coords(centroids)).query(coords(out_codes), k=1, p=1)
        return np.asarray(idx, dtype=np.int64)
    chunk = max(1, 2_000_000 // max(centroids.shape[0] * max(len(table.attrs), 1), 1))
    out = np.empty(out_codes.shape[0], dtype=np.int64)
    for s in range(0, out_codes.shape[0], chunk):
        block = out_codes[s : s + chunk]
        total = np.zeros((block.shape[0], centroids.shape[0]))
        for j, a in enumerate(table.attrs):
            total += a.distance(block[:, j][:, None], centroids[:, j][None, :])
        out[s : s + chunk] = np.argmin(total, axis=1)
    return out


def max_member_distance(
    table: MappedTable, codes: np.ndarray, labels: np.ndarray, centroids: np.ndarray
) -> np.ndarray:
    """(groups, d): largest distance of a member to its centroid, per attribute (Eq. 5)."""
    d = table.distances(codes, centroids[labels])
    out = np.zeros((centroids.shape[0], d.shape[1]))
    np.maximum.at(out, labels, d)
    return out


@dataclass(frozen=True)
class MoveInfo:
    """What moving the outliers did."""

    n_outliers: int
    values_changed: int
    clusters_over_kl: int = 0
    max_kl: float = 0.0


def _noise_codes(
    a: MappedAttribute, centre: np.ndarray, member: np.ndarray, sign: np.ndarray
) -> np.ndarray:
    """Strategy (a), ordered attribute: existing value nearest centre +/- a member's deviation.

    The deviation is drawn from the members' own distances to the centroid, so the cluster's
    distance-to-centroid distribution is kept; a missing centroid stays missing.
    """
    n_real = a.n_values - (1 if a.missing_code >= 0 else 0)
    if n_real <= 1:
        return centre.copy()
    real = a.coord[:n_real]
    target = a.coord[centre] + sign * np.abs(a.coord[member] - a.coord[centre])
    i = np.clip(np.searchsorted(real, target), 1, n_real - 1)
    pick = np.where(np.abs(real[i - 1] - target) <= np.abs(real[i] - target), i - 1, i)
    return np.where(centre == a.missing_code, centre, pick)


def _draw_new_codes(
    table: MappedTable,
    centre: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    member_codes: np.ndarray,
    strategy: OutlierStrategy,
    gen: np.random.Generator,
) -> np.ndarray:
    """New codes (o, d) for outliers joining clusters with the given centroids / member ranges.

    ``member_codes`` holds the in-cluster records sorted by cluster; ``starts``/``sizes``
    give each outlier's cluster range in it.
    """
    if strategy is OutlierStrategy.CENTROID:
        return centre.copy()
    d = len(table.attrs)
    pos = starts[:, None] + np.floor(gen.random((centre.shape[0], d)) * sizes[:, None])
    picks = member_codes[pos.astype(np.int64), np.arange(d)[None, :]]
    if strategy is OutlierStrategy.MEMBER:
        return picks
    signs = gen.choice([-1.0, 1.0], size=picks.shape)
    for j, a in enumerate(table.attrs):
        if a.kind.ordered:
            picks[:, j] = _noise_codes(a, centre[:, j], picks[:, j], signs[:, j])
    return picks


def move_outliers(
    table: MappedTable,
    codes: np.ndarray,
    labels: np.ndarray,
    k: int,
    strategy: OutlierStrategy | str = OutlierStrategy.MEMBER,
    *,
    eps_kl: float = 0.1,
    max_tries: int = 20,
    rng: RngLike = None,
) -> tuple[np.ndarray, np.ndarray, MoveInfo]:
    """Push records of clusters with at most m = k-1 members into the best cluster.

    Returns new codes, new contiguous labels (only clusters with >= k records) and a summary.
    An outlier keeps every attribute within the receiving cluster's largest member distance
    to its centroid; only the others change (Eq. 5). If no cluster has k records, all
    records form one cluster.
    """
    strategy = OutlierStrategy(strategy)
    gen = as_generator(rng)
    sizes = np.bincount(labels)
    big = sizes >= k
    if not big.any():
        return codes.copy(), np.zeros(labels.size, dtype=np.int64), MoveInfo(0, 0)
    remap = np.full(sizes.size, -1, dtype=np.int64)
    remap[big] = np.arange(int(big.sum()))
    new_labels = remap[labels]
    is_out = new_labels < 0
    inside = ~is_out
    n_big = int(big.sum())
    centroids = medoid_codes(table, codes[inside], new_labels[inside], n_big)
    radius = max_member_distance(table, codes[inside], new_labels[inside], centroids)
    out_idx = np.flatnonzero(is_out)
    target = nearest_cluster(table, codes[out_idx], centroids)
    new_codes = codes.copy()
    if out_idx.size == 0:
        return new_codes, new_labels, MoveInfo(0, 0)
    far = table.distances(codes[out_idx], centroids[target]) > radius[target]
    order, starts, bsizes = group_bounds(new_labels[inside], n_big)
    member_codes = codes[inside][order]

    def draw(rows: np.ndarray) -> np.ndarray:
        t = target[rows]
        drawn = _draw_new_codes(
            table, centroids[t], starts[t], bsizes[t], member_codes, strategy, gen
        )
        return np.where(far[rows], drawn, codes[out_idx[rows]])

    new_codes[out_idx] = draw(np.arange(out_idx.size))
    worst_kl, over = 0.0, 0
    if strategy is OutlierStrategy.NOISE:
        by_cluster = np.argsort(target, kind="stable")
        bounds = np.searchsorted(target[by_cluster], np.arange(n_big + 1))
        for cl in np.flatnonzero(np.diff(bounds)):
            rows = by_cluster[bounds[cl] : bounds[cl + 1]]
            members = member_codes[starts[cl] : starts[cl] + bsizes[cl]]
            before = table.distances(members, centroids[cl]).sum(axis=1)

            def kl_of(cand: np.ndarray, before=before, cl=cl) -> float:
                moved = table.distances(cand, centroids[cl]).sum(axis=1)
                return kl_divergence(before, np.concatenate([before, moved]))

            best = new_codes[out_idx[rows]]
            best_kl = kl_of(best)
            for _ in range(max_tries - 1):
                if best_kl <= eps_kl:
                    break
                cand = draw(rows)
                kl = kl_of(cand)
                if kl < best_kl:
                    best, best_kl = cand, kl
            new_codes[out_idx[rows]] = best
            worst_kl = max(worst_kl, best_kl)
            over += int(best_kl > eps_kl)
    new_labels[out_idx] = target
    changed = int((new_codes[out_idx] != codes[out_idx]).sum())
    return new_codes, new_labels, MoveInfo(int(out_idx.size), changed, over, worst_kl)
