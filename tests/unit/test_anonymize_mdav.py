"""MDAV baseline on scikit-learn's diabetes data, and the hybrid measured against it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes

from dp_engine.anonymize import anonymize, mdav_groups

QIS = ["age", "sex", "bmi", "bp"]


@pytest.fixture(scope="module")
def diabetes() -> pd.DataFrame:
    return load_diabetes(scaled=False, as_frame=True).frame


def sse_sst(z: np.ndarray, released: np.ndarray) -> float:
    """Independent SSE/SST (%) on z-scored columns."""
    return 100 * ((z - released) ** 2).sum() / ((z - z.mean(axis=0)) ** 2).sum()


def zscore(frame: pd.DataFrame) -> np.ndarray:
    x = frame[QIS].to_numpy(float)
    return (x - x.mean(axis=0)) / x.std(axis=0)


def min_class_size(frame: pd.DataFrame, qis) -> int:
    """k by an independent group-by over the released quasi-identifiers (missing kept)."""
    return int(frame.groupby(list(qis), dropna=False).size().min())


@pytest.mark.parametrize(("k", "expected"), [(3, 3.34), (5, 5.90), (10, 11.82)])
def test_mdav_reproduces_published_sse(diabetes, k, expected):
    z = zscore(diabetes)
    labels = mdav_groups(z, k)
    sizes = np.bincount(labels)
    assert sizes.min() >= k and sizes.max() <= 2 * k - 1
    means = np.stack([z[labels == g].mean(axis=0) for g in range(sizes.size)])
    assert sse_sst(z, means[labels]) == pytest.approx(expected, abs=0.05)
    res = anonymize(diabetes, QIS, [], k, method="mdav", scaling="zscore")
    assert res.report.sse_sst_pct == pytest.approx(expected, abs=0.05)
    released_z = (res.released[QIS].to_numpy(float) - diabetes[QIS].to_numpy(float).mean(0)) / (
        diabetes[QIS].to_numpy(float).std(0)
    )
    assert sse_sst(z, released_z) == pytest.approx(res.report.sse_sst_pct)
    assert min_class_size(res.released, QIS) >= k


@pytest.mark.parametrize(("k", "factor"), [(3, 1.2), (10, 1.5)])
def test_hybrid_close_to_mdav_and_exactly_k_anonymous(diabetes, k, factor):
    mdav = anonymize(diabetes, QIS, [], k, method="mdav", scaling="zscore")
    hybrid = anonymize(
        diabetes,
        QIS,
        ["target"],
        k,
        scaling="zscore",
        centroid="mean",
        rng=np.random.default_rng(20261126),
    )
    assert hybrid.report.sse_sst_pct <= factor * mdav.report.sse_sst_pct
    assert min_class_size(hybrid.released, QIS) >= k
    assert hybrid.report.k_achieved == min_class_size(hybrid.released, QIS)


@pytest.mark.parametrize("k", [3, 7])
def test_default_hybrid_is_exactly_k_anonymous(diabetes, k):
    res = anonymize(diabetes, QIS, ["target"], k, rng=np.random.default_rng(1))
    assert min_class_size(res.released, QIS) >= k
    # medoid centroids release values that exist in the data
    for col in QIS:
        assert set(res.released[col]) <= set(diabetes[col])
