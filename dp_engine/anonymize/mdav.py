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


def mdav_groups(x: np.ndarray, k: int) -> np.ndarray:
    """Group label (0..g-1) of every row of ``x`` (n, d); groups of size k..2k-1.

    The remaining records are kept at the front of a work array (taken rows are replaced by
    rows from the tail) with a running sum for the centroid and cached squared norms, so a
    distance pass is one matrix-vector product over the m remaining records.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    if k < 1:
        raise AnonymizationError("k must be at least 1.")
    if n < k:
        raise AnonymizationError(f"MDAV needs at least k={k} records; only {n} were given.")
    labels = np.full(n, -1, dtype=np.int64)
    pts = x - x.mean(axis=0)  # centred: smaller norms, less rounding in the norm trick
    norms = np.einsum("ij,ij->i", pts, pts)
    idx = np.arange(n)
    total = pts.sum(axis=0)
    flag = np.zeros(n, dtype=bool)
    m = n
    group = 0

    def sqdist(centre: np.ndarray) -> np.ndarray:
        """Squared distances of the live records to ``centre`` up to the constant |centre|^2."""
        return norms[:m] - 2.0 * (pts[:m] @ centre)

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
        norms[holes] = norms[movers]
        idx[holes] = idx[movers]
        m -= sel.size

    def nearest(d: np.ndarray) -> np.ndarray:
        return np.argpartition(d, k - 1)[:k] if k < d.size else np.arange(d.size)

    while m >= 3 * k:
        r = int(np.argmax(sqdist(total / m)))
        d_r = sqdist(pts[r].copy())
        s_point = pts[int(np.argmax(d_r))].copy()
        take(nearest(d_r))
        take(nearest(sqdist(s_point)))
    if m >= 2 * k:
        r = int(np.argmax(sqdist(total / m)))
        take(nearest(sqdist(pts[r].copy())))
    if m:
        labels[idx[:m]] = group
    return labels
