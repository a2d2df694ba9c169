"""Divergences between two samples of distances-to-centroid (the paper's KL bound)."""

from __future__ import annotations

import numpy as np


def kl_divergence(p_sample: np.ndarray, q_sample: np.ndarray, *, alpha: float = 0.5) -> float:
    """KL(P || Q) in nats between histograms of two samples on shared bins.

    Bins are the distinct quantiles of the pooled sample (between 5 and 50 bins, about
    sqrt(n)); each bin count gets ``alpha`` added so an empty bin gives a finite value.
    Identical samples give 0.
    """
    p_sample = np.asarray(p_sample, dtype=float)
    q_sample = np.asarray(q_sample, dtype=float)
    if p_sample.size == 0 or q_sample.size == 0:
        return 0.0
    pooled = np.concatenate([p_sample, q_sample])
    n_bins = int(np.clip(np.sqrt(pooled.size), 5, 50))
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, n_bins + 1)))
    if edges.size < 2:
        return 0.0
    p = np.histogram(np.clip(p_sample, edges[0], edges[-1]), edges)[0] + alpha
    q = np.histogram(np.clip(q_sample, edges[0], edges[-1]), edges)[0] + alpha
    p = p / p.sum()
    q = q / q.sum()
    return float(np.sum(p * np.log(p / q)))


def wasserstein(p_sample: np.ndarray, q_sample: np.ndarray) -> float:
    """1-Wasserstein (earth mover's) distance between two 1-D samples."""
    if len(p_sample) == 0 or len(q_sample) == 0:
        return 0.0
    from scipy.stats import wasserstein_distance  # here: scipy's bulk is not loaded at app start
    return float(wasserstein_distance(p_sample, q_sample))
