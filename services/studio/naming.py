"""A studio release named by what it is, wherever the ledger's releases are listed (Explore's
My releases, the Ledger page): "Per-record copy of PI-RADS cohort · bounded Laplace,
randomized response +1 · Σ ε 3 per record (local DP)" or "Synthetic copy of PI-RADS cohort ·
MST · ε 1 (central DP) · n̂ 918 rows", never "query of ?".

Reads the stored public answer only (techniques, ε, the DP row count, the dataset's title).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dp_engine.release.techniques import Technique

RECORD = "studio-record"
SYNTHETIC = "studio-synthetic"
SHOWN_TECHNIQUES = 3
_NOISY = {t.value for t in Technique if t.uses_epsilon}


def is_studio(answer: Mapping[str, Any]) -> bool:
    """Whether a stored answer is a studio table (not a figure Explore can draw)."""
    return answer.get("kind") in (RECORD, SYNTHETIC)


def _eps(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "?"
    return f"{v:.3g}" if math.isfinite(v) else "?"


def _technique(label: str) -> str:
    """"Bounded Laplace" -> "bounded Laplace" (a name inside a sentence)."""
    return label if label.startswith("Laplace") else label[:1].lower() + label[1:]


def _techniques(choices: list[Mapping[str, Any]]) -> str:
    """The noise techniques used (not mask, drop or keep), in column order, the first few
    by name."""
    names = list(dict.fromkeys(_technique(str(c.get("technique_label") or c.get("technique")))
                               for c in choices if c.get("technique") in _NOISY))
    if not names:
        return "no noise"
    more = len(names) - SHOWN_TECHNIQUES
    return ", ".join(names[:SHOWN_TECHNIQUES]) + (f" +{more}" if more > 0 else "")


def studio_words(answer: Mapping[str, Any]) -> str:
    """A studio release in words (see the module doc)."""
    dataset = answer.get("dataset_title") or "this dataset"
    if answer.get("kind") == SYNTHETIC:
        rows = answer.get("rows")
        size = f" · n̂ {int(rows):,} rows" if isinstance(rows, int | float) else ""
        return (f"Synthetic copy of {dataset} · MST · ε {_eps(answer.get('epsilon'))} "
                f"(central DP){size}")
    choices = list(answer.get("choices") or [])
    open_columns = sum(1 for c in choices if not c.get("private"))
    text = (f"Per-record copy of {dataset} · {_techniques(choices)} · Σ ε "
            f"{_eps(answer.get('record_epsilon'))} per record (local DP, not central)")
    if open_columns:
        text += f" · {open_columns} column{'s' if open_columns > 1 else ''} NOT private"
    return text
