"""Paper mode (PyDPLib) value types: query codes, the search trace and the results.

Kept apart from the algorithms so the app can import the result shapes without
pulling in the search code, and so the grouped helpers do not import in a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dp_engine.errors import UnknownQueryError

QUERY_TYPES: dict[int, str] = {1: "count", 2: "mean", 3: "median", 4: "variance"}
_QUERY_ALIASES: dict[str, int] = {
    "count": 1,
    "histogram": 1,
    "mean": 2,
    "average": 2,
    "avg": 2,
    "median": 3,
    "variance": 4,
    "var": 4,
}

IN_BAND = "in band"
TOO_LITTLE = "too little noise"
TOO_MUCH = "too much noise"


def query_code(query_type: object) -> int:
    """The paper's query code (1–4) for a code or a name; UnknownQueryError otherwise."""
    if isinstance(query_type, str):
        code = _QUERY_ALIASES.get(query_type.strip().lower())
        if code is not None:
            return code
    elif not isinstance(query_type, bool | np.bool_):
        try:
            code = int(query_type)  # type: ignore[call-overload]
            if code == query_type and code in QUERY_TYPES:
                return code
        except (TypeError, ValueError):
            pass
    raise UnknownQueryError(
        f"Unknown query type {query_type!r}: use 1 (count/histogram), 2 (mean), "
        "3 (median) or 4 (variance)."
    )


@dataclass(frozen=True)
class SearchStep:
    """One probe of the binary search: the index window, the ε tried and the verdict."""

    low_idx: int
    high_idx: int
    mid_idx: int
    epsilon: float
    noise_percent: float
    verdict: str  # IN_BAND, TOO_LITTLE or TOO_MUCH


@dataclass(frozen=True)
class PaperResult:
    """What ``dp_calculate`` returns (the paper's Figure 1 outputs, plus honesty fields).

    ``noise_percent`` is computed against the true data, so it is owner-only information.
    ``found`` is False when no ε of the grid puts the noise in the band; ``epsilon`` is then
    the probed ε whose noise came closest to the band. ``effective_epsilon`` is the privacy
    loss the released values really carry (see ``fit.effective_epsilon``); it is itself
    a lower bound because the search and the data-derived range look at the data.
    """

    dp_data: np.ndarray | list
    epsilon: float
    sensitivity: float
    noise_percent: float
    noise_factor: int
    band: tuple[float, float]
    found: bool
    steps: tuple[SearchStep, ...]
    data_range: tuple | None
    effective_epsilon: float
    query_type: int = 2
    data_type: str = "float"
    n_used: int = 0
    n_dropped: int = 0
    kept: np.ndarray | None = field(default=None, repr=False)


@dataclass(frozen=True)
class GroupedPaperResult:
    """A per-group statistic computed from per-record paper-mode noise (Figures 2–4).

    ``values`` holds the statistic per group (count, mean, median or variance); for the
    median, ``q1`` and ``q3`` are filled too so a box plot can be drawn. ``counts`` is the
    number of (noised) records that fell in each group; for query 1 it equals ``values``.
    Groups with no record left after noising have NaN statistics and a count of 0.
    """

    group_keys: tuple
    values: np.ndarray
    counts: np.ndarray
    q1: np.ndarray | None
    q3: np.ndarray | None
    query_type: int
    value_result: PaperResult
    group_result: PaperResult | None
    epsilon: float
    sensitivity: float
    noise_percent: float
    effective_epsilon: float
    n_dropped: int

    @property
    def median(self) -> np.ndarray | None:
        """The per-group median (query 3 only)."""
        return self.values if self.query_type == 3 else None
