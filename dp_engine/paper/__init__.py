"""Paper mode: a faithful, vectorized re-implementation of PyDPLib (Imtiaz et al.).

Every record is noised with Lap(S_f/ε) (Eq. 3), where S_f is the query's sensitivity, and
ε is picked by Algorithm 1 so the realized noise % lands in the noise factor's band. This
reproduces the paper's figures; it is NOT ε-differentially private at the labelled ε (see
``effective_epsilon``), and the dashboard shows both numbers.

Module map: ``types`` (results), ``data`` (types, missing values, categories),
``fit`` (Eq. 4, noise %, sensitivity, effective ε), ``search`` (Algorithm 1),
``calc`` (``dp_calculate``),
``grouped`` (the per-group statistics behind Figures 2–4).
"""

from __future__ import annotations

from dp_engine.paper.calc import dp_calculate
from dp_engine.paper.fit import (
    data_range,
    effective_epsilon,
    fit_data_to_range,
    noise_percent,
    sensitivity,
)
from dp_engine.paper.grouped import grouped_statistic
from dp_engine.paper.search import DEFAULT_EPSILONS, binary_search_epsilon
from dp_engine.paper.types import QUERY_TYPES, GroupedPaperResult, PaperResult, SearchStep

__all__ = [
    "DEFAULT_EPSILONS",
    "QUERY_TYPES",
    "GroupedPaperResult",
    "PaperResult",
    "SearchStep",
    "binary_search_epsilon",
    "data_range",
    "dp_calculate",
    "effective_epsilon",
    "fit_data_to_range",
    "grouped_statistic",
    "noise_percent",
    "sensitivity",
]
