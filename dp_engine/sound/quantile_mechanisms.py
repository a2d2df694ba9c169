"""DP quantiles on a public candidate grid, computed from ``CandidateCounts`` only.

Every mechanism takes the counts of one or many groups, shape (groups, c + 1) (cell 0 is
empty, cell i + 1 holds the values in [cand_i, cand_(i+1)); see ``aggregates``), one ε per
group (NaN: the group is withheld and gets no draw) and the contribution bound k (the most
rows one patient has). Each is ε_g-DP for group g under adding or removing one patient; the
groups partition the patients, so the joint output is max ε_g-DP (parallel composition).
Outputs are candidate indices, −1 for a withheld group.

* ``independent``: one exponential mechanism per level at ε/m, utility −|#{x < c} − q·n|,
  sensitivity k·max(q, 1 − q) (the engine's original box-plot mechanism).
* ``joint``: JointExp (Gillenwater, Joseph and Kulesza, ICML 2021) on the grid: one draw of
  the whole sorted m-tuple with utility −Σ_j |#{x in [o_(j−1), o_j)} − (q_j − q_(j−1))·n|,
  sensitivity 2k, sampled exactly by dynamic programming (O(m·c²) per group).
* ``cdf``: a noisy hierarchical CDF: a b-ary tree of counts over the cells with discrete
  Laplace noise of scale k·(levels)/ε on every node, made consistent (Hay et al., VLDB 2010),
  then inverted at each level. Because its noise law does not depend on the data, it also
  gives 95 % intervals that are valid whatever the data (``cdf_intervals``).

The true quantile "to the grid" (``true_indices``) is the smallest candidate whose count of
values at or below it (values snapped down to the grid) reaches q·n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dp_engine.sound.mechanisms import dlap_noise, gumbel_argmax

METHODS = ("independent", "joint", "cdf")
JOINT_CELLS = 4_000_000  # groups · c² per JointExp block (32 MB of float64)


def _live(eps: np.ndarray) -> np.ndarray:
    return np.isfinite(eps) & (eps > 0)


def true_indices(counts: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Index of the grid quantile per (group, level); −1 for an empty group."""
    cum = np.cumsum(counts, axis=1)
    n = cum[:, -1:]
    at_or_below = cum[:, 1:]                        # #{x < cand_(o+1)} = #{snapped ≤ cand_o}
    out = np.empty((counts.shape[0], len(qs)), dtype=np.intp)
    for j, q in enumerate(qs):
        out[:, j] = np.argmax(at_or_below >= q * n - 1e-9 * np.maximum(n, 1), axis=1)
    out[n[:, 0] <= 0] = -1
    return out


# ------------------------------------------------------------------ independent


def independent(counts: np.ndarray, eps: np.ndarray, qs: Sequence[float], k: int,
                rng: np.random.Generator) -> np.ndarray:
    """Per-level exponential mechanism at ε/m (Gumbel-max sampling)."""
    c = counts.shape[1] - 1
    below = np.cumsum(counts, axis=1).astype(float)
    n = below[:, -1:]
    below = below[:, :c]
    live = _live(eps)
    out = np.full((counts.shape[0], len(qs)), -1, dtype=np.intp)
    if not live.any():
        return out
    eps_q = eps[live, None] / len(qs)
    for j, q in enumerate(qs):
        sens = k * max(q, 1.0 - q)
        logits = np.abs(below[live] - q * n[live])
        logits *= -eps_q / (2.0 * sens)
        out[live, j] = gumbel_argmax(logits, rng)
    return np.sort(out, axis=1)


# ------------------------------------------------------------------ JointExp


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(np.log(np.sum(np.exp(a - top), axis=axis, keepdims=True)) + top, axis)


def _joint_block(below: np.ndarray, n: np.ndarray, w: np.ndarray, qs: Sequence[float],
                 rng: np.random.Generator) -> np.ndarray:
    """Exact JointExp draws for a block of groups (below: (g, c), n and w: (g,))."""
    g, c = below.shape
    levels = np.asarray(qs, dtype=float)
    m = levels.size
    gaps = np.diff(np.concatenate([[0.0], levels, [1.0]]))
    upper = np.triu(np.ones((c, c), dtype=bool))    # b ≥ a: outputs are sorted
    wn = w[:, None, None]

    def kernel(j: int) -> np.ndarray:               # log weight of o_(j−1) = a → o_j = b
        inner = below[:, None, :] - below[:, :, None] - gaps[j] * n[:, None, None]
        out = -wn * np.abs(inner)
        out[:, ~upper] = -np.inf
        return out

    # beta[j][:, a]: log total weight of completing the tuple from o_j = a (j = 1..m)
    beta = [np.empty(0)] * (m + 1)
    beta[m] = -w[:, None] * np.abs(n[:, None] - below - gaps[m] * n[:, None])
    for j in range(m - 1, 0, -1):
        beta[j] = _lse(kernel(j) + beta[j + 1][:, None, :], axis=2)
    out = np.empty((g, m), dtype=np.intp)
    first = -w[:, None] * np.abs(below - gaps[0] * n[:, None]) + beta[1]
    out[:, 0] = gumbel_argmax(first, rng)
    rows = np.arange(g)
    for j in range(1, m):
        logits = kernel(j)[rows, out[:, j - 1], :] + beta[j + 1]
        out[:, j] = gumbel_argmax(logits, rng)
    return out


def joint(counts: np.ndarray, eps: np.ndarray, qs: Sequence[float], k: int,
          rng: np.random.Generator) -> np.ndarray:
    """JointExp on the grid: one exact draw of the sorted tuple per group (sensitivity 2k)."""
    c = counts.shape[1] - 1
    below_all = np.cumsum(counts, axis=1).astype(float)
    out = np.full((counts.shape[0], len(qs)), -1, dtype=np.intp)
    idx = np.flatnonzero(_live(eps))
    step = max(1, JOINT_CELLS // (c * c))
    for start in range(0, idx.size, step):
        sel = idx[start : start + step]
        w = eps[sel] / (2.0 * 2.0 * k)
        out[sel] = _joint_block(below_all[sel, :c], below_all[sel, c], w, qs, rng)
    return out


# ------------------------------------------------------------------ noisy CDF (tree)


@dataclass(frozen=True)
class TreeShape:
    """A b-ary tree over ``cells`` leaves (padded to b^depth); noise on every level."""

    cells: int
    branching: int

    @property
    def depth(self) -> int:
        return max(1, math.ceil(math.log(self.cells) / math.log(self.branching) - 1e-12))

    @property
    def leaves(self) -> int:
        return self.branching ** self.depth

    @property
    def levels(self) -> int:
        """Levels that carry noise (root to leaves): the per-patient L1 change is k·levels."""
        return self.depth + 1


def default_branching(cells: int) -> int:
    """The branching factor with the smallest prefix-noise variance (before consistency).

    A prefix uses at most (b − 1) nodes per level over log_b(cells) levels, each of
    variance ∝ levels²; b = 4..16 minimize (b − 1)·levels³ for grids of 10²–10⁴ cells.
    """
    best, best_cost = 2, math.inf
    for b in (2, 4, 8, 16, 32):
        shape = TreeShape(cells, b)
        cost = (b - 1) * shape.depth * shape.levels**2
        if cost < best_cost - 1e-9:
            best, best_cost = b, cost
    return best


def _levels_from_leaves(leaves: np.ndarray, b: int, depth: int) -> list[np.ndarray]:
    """True node counts per level, root first: level d has b^d nodes."""
    out = [leaves]
    for _ in range(depth):
        cur = out[-1]
        out.append(cur.reshape(cur.shape[0], -1, b).sum(axis=2))
    return out[::-1]


def consistent_leaves(noisy: list[np.ndarray], b: int) -> np.ndarray:
    """Hay et al.'s least-squares consistent leaf counts from noisy levels (root first).

    Bottom-up: z = (b^h − b^(h−1))/(b^h − 1)·x̃ + (b^(h−1) − 1)/(b^h − 1)·Σ z_children, with
    h the node height (leaves 1); top-down: each child gets z + (parent − Σ siblings' z)/b.
    """
    depth = len(noisy) - 1
    z = [None] * (depth + 1)
    z[depth] = noisy[depth]
    for d in range(depth - 1, -1, -1):
        h = depth - d + 1
        child = z[d + 1].reshape(z[d + 1].shape[0], -1, b).sum(axis=2)
        bh, bh1 = float(b) ** h, float(b) ** (h - 1)
        z[d] = ((bh - bh1) * noisy[d] + (bh1 - 1.0) * child) / (bh - 1.0)
    top = z[0]
    for d in range(1, depth + 1):
        kids = z[d].reshape(z[d].shape[0], -1, b)
        gap = (top - kids.sum(axis=2)) / b
        top = (kids + gap[:, :, None]).reshape(z[d].shape[0], -1)
    return top


@dataclass(frozen=True)
class NoisyCdf:
    """Noisy prefix counts F̂(o) = #{snapped ≤ cand_o} + noise, and the noisy total N̂."""

    prefix: np.ndarray          # (groups, c)
    total: np.ndarray           # (groups,)
    scale: np.ndarray           # discrete-Laplace scale per node, per group (NaN: withheld)
    shape: TreeShape
    nodes: np.ndarray           # (groups, nodes): the noisy node counts, root level first


def noisy_cdf(counts: np.ndarray, eps: np.ndarray, k: int, rng: np.random.Generator,
              branching: int | None = None) -> NoisyCdf:
    """Noise every node of the tree over the cells; withheld groups (ε NaN) get NaN."""
    g, cells = counts.shape
    b = default_branching(cells) if branching is None else int(branching)
    shape = TreeShape(cells, b)
    live = _live(eps)
    scale = np.where(live, k * shape.levels / np.where(live, eps, 1.0), np.nan)
    leaves = np.zeros((g, shape.leaves))
    leaves[:, :cells] = counts
    true = np.concatenate(_levels_from_leaves(leaves, b, shape.depth), axis=1)
    t = np.where(live, scale, 1.0)[:, None]
    nodes = np.where(live[:, None], true + dlap_noise(t, true.shape, rng), np.nan)
    return cdf_from_nodes(nodes, scale, cells, b)


def cdf_from_nodes(nodes: np.ndarray, scale: np.ndarray, cells: int, b: int) -> NoisyCdf:
    """The consistent noisy CDF from noisy node counts (post-processing only)."""
    shape = TreeShape(cells, b)
    g = nodes.shape[0]
    live = np.isfinite(nodes).all(axis=1)
    prefix = np.full((g, cells - 1), np.nan)
    total = np.full(g, np.nan)
    if live.any():
        levels, start = [], 0
        for d in range(shape.depth + 1):
            levels.append(nodes[live, start : start + b**d])
            start += b**d
        est = consistent_leaves(levels, b)
        cum = np.cumsum(est[:, :cells], axis=1)
        prefix[live] = cum[:, 1:]                   # F̂(o) covers cells 0..o+1
        total[live] = cum[:, -1]
    return NoisyCdf(prefix, total, np.asarray(scale, dtype=float), shape, nodes)


def invert(cdf: NoisyCdf, qs: Sequence[float]) -> np.ndarray:
    """Per level, the middle of the region where F̂ crosses q·max(N̂, 0), as a (half-)index.

    The region runs from the first o with F̂(o) ≥ q·N̂ to the first o after which F̂ stays
    there; a noisy CDF need not be monotone, and its middle is less biased than either end.
    −1 for withheld groups. Monotone in q.
    """
    g, c = cdf.prefix.shape
    out = np.full((g, len(qs)), -1.0)
    live = np.isfinite(cdf.total)
    if not live.any():
        return out
    pre = cdf.prefix[live]
    n = np.maximum(cdf.total[live], 0.0)[:, None]
    for j, q in enumerate(qs):
        hit = pre >= q * n
        hit[:, -1] = True
        first = np.argmax(hit, axis=1)
        miss = ~hit
        last = np.where(miss.any(axis=1), c - np.argmax(miss[:, ::-1], axis=1), 0)
        out[live, j] = (first + np.maximum(last, first)) / 2.0
    return out


def cdf(counts: np.ndarray, eps: np.ndarray, qs: Sequence[float], k: int,
        rng: np.random.Generator, branching: int | None = None) -> np.ndarray:
    """Quantile indices from the noisy consistent CDF."""
    return invert(noisy_cdf(counts, eps, k, rng, branching), qs)


# ------------------------------------------------------------------ CDF intervals


def rank_noise_variance(cells: int, b: int, positions: Sequence[int],
                        qs: Sequence[float]) -> np.ndarray:
    """Σ_v (A[v, o] − q·r_v)² per (position o, level q): ``prefix_moments``' sum2 at a few
    points, without the full matrix (≈1000× faster on a 1001-point grid).

    The consistent leaves are the least-squares fit (HᵀH)⁻¹Hᵀx̃ of the noisy nodes (H: leaves
    to every node), so for the leaf vector u = 1[prefix of o] − q·1[cells] the sum is
    uᵀ(HᵀH)⁻¹u, and (HᵀH)⁻¹u is ``consistent_leaves`` of u placed on the leaf level.
    """
    shape = TreeShape(cells, b)
    u = np.zeros((len(qs), shape.leaves))
    for j, (o, q) in enumerate(zip(positions, qs, strict=True)):
        u[j, : int(o) + 2] = 1.0                    # F̂(o) covers cells 0..o+1
        u[j, :cells] -= q
    levels = [np.zeros((len(qs), b**d)) for d in range(shape.depth)] + [u]
    return np.sum(u * consistent_leaves(levels, b), axis=1)


@lru_cache(maxsize=32)
def prefix_moments(cells: int, b: int) -> np.ndarray:
    """Per candidate o, Σ_v A[v,o]^i·r_v^(p−i) for p = 2 (i = 0..2) and p = 4 (i = 0..4).

    F̂(o) = Σ_v A[v, o]·x̃_v and N̂ = Σ_v r_v·x̃_v over all tree nodes v (the consistency
    step is linear), so D_o = E(o) − q·E_N = Σ_v (A[v, o] − q·r_v)·Z_v; these sums give its
    variance and fourth cumulant for any q. Rows: [Σr², ΣAr, ΣA², Σr⁴, ΣAr³, ΣA²r², ΣA³r, ΣA⁴].
    """
    shape = TreeShape(cells, b)
    sizes = [b**d for d in range(shape.depth + 1)]
    starts = np.cumsum([0] + sizes)
    n_nodes = int(starts[-1])
    out = np.zeros((8, cells - 1))
    block = max(1, 4_000_000 // shape.leaves)          # unit vectors per pass: ~32 MB
    for first in range(0, n_nodes, block):
        ids = np.arange(first, min(first + block, n_nodes))
        levels = []
        for d, size in enumerate(sizes):
            lv = np.zeros((ids.size, size))
            inside = (ids >= starts[d]) & (ids < starts[d + 1])
            lv[np.flatnonzero(inside), ids[inside] - starts[d]] = 1.0
            levels.append(lv)
        est = consistent_leaves(levels, b)
        cum = np.cumsum(est[:, :cells], axis=1)
        a, r = cum[:, 1:], cum[:, -1:]
        out[0] += np.sum(r**2, axis=0) * np.ones(cells - 1)
        out[1] += np.sum(a * r, axis=0)
        out[2] += np.sum(a**2, axis=0)
        for i in range(5):
            out[3 + i] += np.sum(a**i * r ** (4 - i), axis=0)
    return out


def _dlap_cumulants(t: float) -> tuple[float, float]:
    """Variance and fourth cumulant of discrete Laplace of scale t (difference of geometrics)."""
    a = math.exp(-1.0 / t)
    one = -math.expm1(-1.0 / t)
    return 2.0 * a / one**2, 2.0 * a * (1.0 + 4.0 * a + a * a) / one**4


def noise_quantile(cells: int, b: int, t: float, q: float, level: float) -> np.ndarray:
    """Per candidate o, the ``level`` quantile of D_o = E(o) − q·E_N (symmetric law).

    D_o = Σ_v (A[v, o] − q·r_v)·Z_v with Z_v iid discrete Laplace(t) (``prefix_moments``);
    Cornish–Fisher from its exact variance and fourth cumulant.
    """
    mom = prefix_moments(cells, b)
    sum2 = q * q * mom[0] - 2.0 * q * mom[1] + mom[2]
    binom = (1.0, -4.0, 6.0, -4.0, 1.0)
    sum4 = sum(binom[i] * q ** (4 - i) * mom[3 + i] for i in range(5))
    k2, k4 = _dlap_cumulants(t)
    var = k2 * np.maximum(sum2, 0.0)
    kappa4 = k4 * np.maximum(sum4, 0.0)
    sd = np.sqrt(var)
    excess = np.divide(kappa4, var**2, out=np.zeros_like(var), where=var > 0)
    from scipy import special  # here, not at import: the app starts without it

    z = special.ndtri(level)
    return sd * (z + (z**3 - 3.0 * z) * excess / 24.0)


def cdf_intervals(cdf_: NoisyCdf, qs: Sequence[float], level: float = 0.95
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) candidate indices that hold the true grid quantile w.p. ≥ ``level``.

    With h_o the (1 + level)/2 quantile of D_o = E(o) − q·E_N (symmetric):
    low = first o with F̂(o) ≥ q·N̂ − h_o; high = first o after which F̂ stays ≥ q·N̂ + h_o.
    If the true index Q is below low, then F̂(Q) < q·N̂ − h_Q although F(Q) ≥ q·n, i.e.
    D_Q < −h_Q; if it is above high, then D_(Q−1) > h_(Q−1). Both are events about the noise
    at one point fixed by the data, each of probability ≤ (1 − level)/2.
    """
    g, c = cdf_.prefix.shape
    lo = np.full((g, len(qs)), -1, dtype=np.intp)
    hi = np.full((g, len(qs)), -1, dtype=np.intp)
    tail = (1.0 + level) / 2.0
    for t in np.unique(cdf_.scale[np.isfinite(cdf_.scale)]):
        rows = np.flatnonzero(cdf_.scale == t)
        pre = cdf_.prefix[rows]
        n = cdf_.total[rows][:, None]
        for j, q in enumerate(qs):
            h = noise_quantile(c + 1, cdf_.shape.branching, float(t), q, tail)
            below = pre >= q * n - h
            below[:, -1] = True
            lo[rows, j] = np.argmax(below, axis=1)
            above = pre >= q * n + h
            above[:, -1] = True
            # first index after the last o where F̂(o) < q·N̂ + h_o
            fails = ~above
            last_fail = c - 1 - np.argmax(fails[:, ::-1], axis=1)
            any_fail = fails.any(axis=1)
            hi[rows, j] = np.where(any_fail, np.minimum(last_fail + 1, c - 1), 0)
    return lo, hi
