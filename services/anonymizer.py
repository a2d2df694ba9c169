"""The anonymizer's run as runner work: k-anonymity (not DP) over the owner's own rows.

``anonymize_job`` runs ``dp_engine.anonymize`` where the runner puts heavy work (inline, or a
lower-priority child process) and returns data: the escaped CSV, the before/after points of
the scatter (at most ``MAX_PLOT_POINTS`` rows) and the report. It releases nothing to anyone
and charges no budget; the page (owner only) draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from dp_engine.anonymize import anonymize
from dp_engine.anonymize.pipeline import AnonymizationResult
from services.csv_safe import frame_csv

MAX_PLOT_POINTS = 5000


@dataclass(frozen=True)
class Anonymized:
    """What the page shows: the download, the scatter's data and the report (no rows kept
    in ``result``: its released table and group ids are left out)."""

    store: dict[str, Any]
    result: AnonymizationResult
    n_records: int
    title: str


def _plain(series: pd.Series) -> list:
    """JSON-safe values for the figure (dates as ISO text, missing as None)."""
    if pd.api.types.is_datetime64_any_dtype(series):
        return [None if pd.isna(v) else v.isoformat() for v in series]
    return [None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for v in series]


def plot_data(frame: pd.DataFrame, released: pd.DataFrame, groups: np.ndarray,
              qis: list[str]) -> dict:
    """Before and after values of the quasi-identifiers, with each row's group."""
    rows = np.arange(len(frame))
    if rows.size > MAX_PLOT_POINTS:
        rows = np.linspace(0, rows.size - 1, MAX_PLOT_POINTS).astype(int)
    return {
        "groups": groups[rows].tolist(),
        "before": {q: _plain(frame[q].iloc[rows]) for q in qis},
        "after": {q: _plain(released[q].iloc[rows]) for q in qis},
    }


def anonymize_job(services: Any, progress: Any, dataset_id: str, qis: list[str],
                  sensitive: list[str], k: int, method: str, mode: str,
                  rng: Any = None) -> Anonymized:
    """Anonymize the dataset's rows (columns already checked by the page)."""
    ds = services.registry.get(str(dataset_id))
    progress(0.1, "Anonymizing…")
    result = anonymize(ds.frame, qis, sensitive, k, method=method, sensitive_mode=mode,
                       schema=ds.schema, rng=rng)
    store = {
        "csv": frame_csv(result.release(rng)),
        "filename": f"{ds.id}-k{k}-{method}-anonymized.csv",
        "plot": plot_data(ds.frame, result.released, result.groups, qis),
        "labels": {c.name: c.display for c in ds.schema.columns},
        "method": method,
        "k": k,
    }
    light = replace(result, released=result.released.iloc[:0], groups=result.groups[:0])
    return Anonymized(store, light, len(ds.frame), ds.title or ds.id)
