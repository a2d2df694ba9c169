"""Model check (seed 003 Tables 1.4 and 2.3): does a model trained on the DP copy do as well?

Logistic regression trained on the original training rows and on the DP copy (its rows for
the same patients, or the whole synthetic table), both tested on held-out ORIGINAL rows:
precision, recall, accuracy, ROC AUC. And k-means cluster shares, original vs DP, with the
clusters found on the original (the DP rows are assigned to those centres). Owner only: it
reads the original. Features: numeric columns scaled by their public bounds, categories
one-hot from the public lists; missing numbers at the middle of the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dp_engine.errors import DPError
from dp_engine.schema import NUMERIC_KINDS, ColumnKind, Schema

if TYPE_CHECKING:
    from sklearn.linear_model import LogisticRegression

TEST_SHARE = 0.3
CLUSTERS = 3
MISSING = ("The model check needs scikit-learn, which is not installed on this server; ask the "
           "administrator to install the 'studio' extra: pip install -e '.[studio]'.")


def _sklearn() -> Any:
    """scikit-learn, imported on first use (the app starts without it); DPError if absent."""
    try:
        import sklearn.cluster
        import sklearn.linear_model
        import sklearn.metrics
    except ImportError:
        raise DPError(MISSING) from None
    return sklearn


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    accuracy: float
    auc: float


@dataclass(frozen=True)
class ModelCheck:
    target: str
    features: tuple[str, ...]
    original: Scores
    dp: Scores
    cluster_original: tuple[float, ...]
    cluster_dp: tuple[float, ...]
    test_rows: int
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def binary_targets(schema: Schema, columns: Sequence[str]) -> list[str]:
    """Columns a logistic regression can predict: booleans and two-category columns."""
    return [name for name, spec in zip(columns, map(schema.column, columns), strict=True)
            if spec.kind is ColumnKind.BOOLEAN or (spec.categories and len(spec.categories) == 2)]


def _target(series: pd.Series, schema: Schema, name: str) -> np.ndarray:
    spec = schema.column(name)
    cats = list(spec.categories or (False, True))
    positive = cats[-1]
    s = series.astype(object)
    return np.asarray([str(v) == str(positive) for v in s], dtype=int)


def _features(frame: pd.DataFrame, schema: Schema, names: Sequence[str]) -> np.ndarray:
    parts = []
    for name in names:
        spec = schema.column(name)
        if spec.kind in NUMERIC_KINDS and spec.has_bounds and not (
                spec.kind is ColumnKind.ORDINAL and frame[name].dtype == "category"):
            lo, hi = spec.bounds()
            x = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float,
                                                                      na_value=np.nan)
            x = np.where(np.isfinite(x), np.clip(x, lo, hi), (lo + hi) / 2)
            parts.append(((x - lo) / (hi - lo))[:, None])
        elif spec.categories:
            s = frame[name].astype(object).map(lambda v: None if pd.isna(v) else str(v))
            parts.append(np.column_stack([(s == str(c)).to_numpy(dtype=float)
                                          for c in spec.categories]))
    return np.hstack(parts) if parts else np.zeros((len(frame), 0))


def _scores(model: LogisticRegression, x: np.ndarray, y: np.ndarray) -> Scores:
    metrics = _sklearn().metrics
    pred = model.predict(x)
    prob = model.predict_proba(x)[:, 1] if len(model.classes_) == 2 else np.zeros(len(y))
    auc = metrics.roc_auc_score(y, prob) if len(np.unique(y)) == 2 else math.nan
    return Scores(float(metrics.precision_score(y, pred, zero_division=0)),
                  float(metrics.recall_score(y, pred, zero_division=0)),
                  float(metrics.accuracy_score(y, pred)), float(auc))


def _fit(x: np.ndarray, y: np.ndarray) -> LogisticRegression | None:
    if len(np.unique(y)) < 2:
        return None
    return _sklearn().linear_model.LogisticRegression(max_iter=500).fit(x, y)


def _nan_scores() -> Scores:
    return Scores(math.nan, math.nan, math.nan, math.nan)


def model_check(original: pd.DataFrame, dp: pd.DataFrame, schema: Schema, target: str, *,
                paired: bool, seed: int = 0) -> ModelCheck:
    """Scores of the original-trained and DP-trained models on held-out original rows.

    ``paired``: the DP table has one row per original row (per-record copy), so the DP
    model is trained on the DP rows of the training patients only; otherwise (synthetic
    copy) on the whole DP table.
    """
    _sklearn()  # the message, before any work, when scikit-learn is absent
    features = tuple(n for n in dp.columns if n != target and n in original
                     and _usable(schema, n))
    rng = np.random.default_rng(seed)
    n = len(original)
    test = np.zeros(n, dtype=bool)
    test[rng.permutation(n)[: max(1, int(TEST_SHARE * n))]] = True
    x_orig, y_orig = _features(original, schema, features), _target(original[target], schema,
                                                                     target)
    x_dp, y_dp = _features(dp, schema, features), _target(dp[target], schema, target)
    if paired:
        x_dp, y_dp = x_dp[~test], y_dp[~test]
    m_orig, m_dp = _fit(x_orig[~test], y_orig[~test]), _fit(x_dp, y_dp)
    s_orig = _scores(m_orig, x_orig[test], y_orig[test]) if m_orig else _nan_scores()
    s_dp = _scores(m_dp, x_orig[test], y_orig[test]) if m_dp else _nan_scores()
    c_orig, c_dp = cluster_shares(x_orig, _features(dp, schema, features), seed=seed)
    note = "" if paired else ("The synthetic table was made from every row, held-out ones "
                              "included, so its scores are slightly optimistic.")
    return ModelCheck(target, features, s_orig, s_dp, c_orig, c_dp, int(test.sum()), note)


def _usable(schema: Schema, name: str) -> bool:
    spec = schema.column(name)
    return (spec.kind in NUMERIC_KINDS and spec.has_bounds) or bool(spec.categories)


def cluster_shares(x_orig: np.ndarray, x_dp: np.ndarray, *, seed: int = 0,
                   k: int = CLUSTERS) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Share of rows in each k-means cluster (centres fitted on the original)."""
    if x_orig.shape[1] == 0 or len(x_orig) < k:
        return (), ()
    km = _sklearn().cluster.KMeans(n_clusters=k, n_init=3, random_state=seed).fit(x_orig)
    a = np.bincount(km.labels_, minlength=k) / len(x_orig)
    b = np.bincount(km.predict(x_dp), minlength=k) / max(len(x_dp), 1)
    order = np.argsort(-a)
    return tuple(float(v) for v in a[order]), tuple(float(v) for v in b[order])
