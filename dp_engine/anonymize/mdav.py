"""MDAV microaggregation (Domingo-Ferrer & Torra), the baseline the paper's method is judged by.

Classic fixed-size variant on a Euclidean matrix: while at least 3k records remain, take the
record r farthest from the centroid of the remaining ones and the record s farthest from r,
and form a group of r with its k-1 nearest remaining records, then the same around s. With
2k..3k-1 records left, one more group around the record farthest from the centroid and the
rest as the last group; with fewer than 2k left, they form the last group. Every group has
between k and 2k-1 records.
"""

from __future__ import annotations

import numpy as np

from dp_engine.anonymize.errors import AnonymizationError


def _sqdist(points: np.ndarray, centre: np.ndarray) -> np.ndarray:
    diff = points - centre
    return np.einsum("ij,ij->i", diff, diff)


def mdav_groups(x: np.ndarray, k: int) -> np.ndarray:
    """Group label (0..g-1) of every row of ``x`` (n, d); groups of size k..2k-1.

    The remaining records are kept at the front of a work array (taken rows are replaced by
    rows from the tail) with a running sum for the centroid, so each step costs O(m d) for
    m remaining records without copying them.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    if k < 1:
        raise AnonymizationError("k must be at least 1.")
    if n < k:
        raise AnonymizationError(f"MDAV needs at least k={k} records; only {n} were given.")
    labels = np.full(n, -1, dtype=np.int64)
    pts = x.copy()
    idx = np.arange(n)
    total = pts.sum(axis=0)
    flag = np.zeros(n, dtype=bool)
    m = n
    group = 0

    def take(sel: np.ndarray) -> None:
        nonlocal m, total, group
        labels[idx[sel]] = group
        group += 1
        total = total - pts[sel].sum(axis=0)
        tail = np.arange(m - sel.size, m)
        holes = sel[sel < m - sel.size]
        flag[sel] = True
        movers = tail[~flag[tail]]
        flag[sel] = False
        pts[holes] = pts[movers]
        idx[holes] = idx[movers]
        m -= sel.size

    def nearest(d: np.ndarray) -> np.ndarray:
        return np.argpartition(d, k - 1)[:k] if k < d.size else np.arange(d.size)

    while m >= 3 * k:
        live = pts[:m]
        r = int(np.argmax(_sqdist(live, total / m)))
        d_r = _sqdist(live, live[r])
        s_point = live[int(np.argmax(d_r))].copy()
        take(nearest(d_r))
        take(nearest(_sqdist(pts[:m], s_point)))
    if m >= 2 * k:
        live = pts[:m]
        r = int(np.argmax(_sqdist(live, total / m)))
        take(nearest(_sqdist(live, live[r])))
    if m:
        labels[idx[:m]] = group
    return labels
