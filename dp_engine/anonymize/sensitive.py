"""Sensitive attributes inside a cluster: flatten to the centroid (Eq. 9) or stir with a KL
bound on the distance-to-centroid distribution (Eq. 10)."""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from dp_engine.anonymize.divergence import kl_divergence
from dp_engine.anonymize.table import MappedTable
from dp_engine.anonymize.vq import group_bounds, medoid_codes
from dp_engine.rng import RngLike, as_generator


class SensitiveMode(StrEnum):
    """What happens to the sensitive columns within each group."""

    FLATTEN = "flatten"  # Eq. 9: every member gets the group's medoid value
    SHUFFLE = "shuffle"  # Eq. 10: values permuted within the group, one column at a time
    REDRAW = "redraw"  # Eq. 10: values drawn with replacement from the group's own values


def flatten(table: MappedTable, codes: np.ndarray, labels: np.ndarray, n_groups: int) -> np.ndarray:
    """Eq. 9: each member's sensitive codes replaced by its group's medoid codes."""
    return medoid_codes(table, codes, labels, n_groups)[labels]


def _stir_once(
    codes: np.ndarray,
    labels: np.ndarray,
    n_groups: int,
    mode: SensitiveMode,
    gen: np.random.Generator,
) -> np.ndarray:
    order, starts, sizes = group_bounds(labels, n_groups)
    out = np.empty_like(codes)
    sorted_labels = labels[order]
    for j in range(codes.shape[1]):
        if mode is SensitiveMode.SHUFFLE:
            perm = np.lexsort((gen.random(labels.size), labels))
        else:
            pos = starts[sorted_labels] + np.floor(
                gen.random(labels.size) * sizes[sorted_labels]
            ).astype(np.int64)
            perm = order[pos]
        out[order, j] = codes[perm, j]
    return out


def stir(
    table: MappedTable,
    codes: np.ndarray,
    labels: np.ndarray,
    n_groups: int,
    mode: SensitiveMode | str = SensitiveMode.SHUFFLE,
    *,
    base_distance: np.ndarray | None = None,
    eps_kl: float = 0.05,
    max_tries: int = 20,
    rng: RngLike = None,
) -> tuple[np.ndarray, float]:
    """Eq. 10: new sensitive codes within groups with KL(before || after) <= ``eps_kl``.

    The distribution compared is the pooled distance of every record to its group's centroid
    (sensitive attributes, plus ``base_distance`` for the other attributes when given).
    Draws are repeated up to ``max_tries`` times; the draw with the smallest KL is returned
    with its KL (it may exceed ``eps_kl`` if no draw met the bound; the report shows it).
    A shuffle keeps each column's multiset per group, so with a single sensitive column and
    flattened quasi-identifiers its KL is exactly 0.
    """
    mode = SensitiveMode(mode)
    gen = as_generator(rng)
    if codes.shape[1] == 0:
        return codes.copy(), 0.0
    centre = medoid_codes(table, codes, labels, n_groups)[labels]
    base = np.zeros(labels.size) if base_distance is None else base_distance
    before = base + table.distances(codes, centre).sum(axis=1)
    best, best_kl = codes, np.inf
    for _ in range(max(1, max_tries)):
        cand = _stir_once(codes, labels, n_groups, mode, gen)
        kl = kl_divergence(before, base + table.distances(cand, centre).sum(axis=1))
        if kl < best_kl:
            best, best_kl = cand, kl
        if best_kl <= eps_kl:
            break
    return best, float(best_kl)
