"""Releases from aggregates: the only place sound-mode noise is added to data.

A data source computes the aggregates of ``aggregates`` where the data live; these
functions add the noise and post-process. Every function takes one ε for the whole release
or one ε per group (NaN or 0: the group is *withheld*: no draw, value NaN). Groups partition
the patients, so a release with per-group ε_g is max_g ε_g-DP (parallel composition); that
maximum is ``Release.epsilon``. Sensitivities scale with the aggregates' contribution k (the
most rows one patient has): counts k, sums k·Δ, quantile utilities and CDF trees k·Δ.

Error labels follow the one definition of ``accuracy`` (absolute error in the statistic's
unit; relative error against the statistic's own scale). ``expected_error`` comes from
public inputs only (ε, bounds, bins, a public size n̂ and, when given, the public shapes of
a ``GroupScales``); the 95 % intervals also use the release's own noisy numbers
(post-processing) and hold whatever the data.

* ``release_counts`` (``CellCounts``): counts, histograms, DP group sizes, the pilot;
* ``release_moments`` (``MomentSums``): means and variances;
* ``release_quantiles`` (``CandidateCounts``): quantiles and box plots;
* ``finish``: redo the post-processing of noisy components (``tiers.refine``).
"""

from __future__ import annotations

from typing import Any

from dp_engine.errors import UnknownQueryError
from dp_engine.sound.release import Release
from dp_engine.sound.releases.common import (
    BUILD_LEVEL,
    FINE_CANDIDATES,
    LEVEL,
    group_epsilons,
    public_from_params,
)
from dp_engine.sound.releases.counts import (
    count_cell_error,
    finish_counts,
    release_counts,
    same_edges,
)
from dp_engine.sound.releases.moments import (
    finish_moments,
    moment_error,
    moment_error_scales,
    moment_noise,
    release_moments,
)
from dp_engine.sound.releases.quantile_error import (
    expected_quantile_error,
    uniform_quantile_error,
)
from dp_engine.sound.releases.quantiles import (
    candidates_for,
    finish_quantiles,
    release_quantiles,
)
from dp_engine.sound.statistic import Statistic

__all__ = [
    "BUILD_LEVEL", "FINE_CANDIDATES", "LEVEL", "candidates_for", "count_cell_error",
    "expected_quantile_error", "finish", "finish_counts", "finish_moments", "finish_quantiles",
    "group_epsilons", "moment_error", "moment_error_scales", "moment_noise", "public_from_params",
    "release_counts", "release_moments", "release_quantiles", "same_edges",
    "uniform_quantile_error",
]


def finish(statistic: str, noisy, scales, params, eps, sensitivity=None, *,
           withheld: Any = False) -> Release:
    """Post-process noisy components into a Release (used again by ``refine``)."""
    statistic = Statistic.of(statistic)
    if statistic.counts:
        return finish_counts(statistic, noisy, scales, params, eps, withheld=withheld)
    if statistic.moments:
        return finish_moments(statistic, noisy, scales, params, eps, sensitivity or {},
                              withheld=withheld)
    if statistic is Statistic.QUANTILES and any(name.startswith("tree") for name in noisy):
        return finish_quantiles(noisy, scales, params, eps, withheld=withheld)
    raise UnknownQueryError(f"Cannot post-process a release of statistic {statistic!r}.")
