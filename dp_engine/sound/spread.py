"""What a relative error is relative to: one public scale per statistic and group.

Relative error = mean absolute error over the statistic's cells / a public scale of the
group, the same for the role's band, the stated expected error and the owner's realized
noise:

* count and histogram: the counts themselves (n̂_g, or n̂_g / cells for a histogram);
* mean: the group's standard deviation;
* variance: the group's variance;
* quantiles (a box plot): the group's 90 % range, q95 − q5: the span its whiskers draw;
  the error is the box's (its median and quartiles, ``BAND_LEVELS``). The whiskers (5th and
  95th percentiles) sit where a group has few patients, so they are far less precise: they
  are drawn with their own 95 % intervals, which hold whatever the data, but they do not set
  the price — a partner's box is then coarser than a collaborator's and still says where
  the middle is, at an ε a partner's budget can afford.

For a location statistic (a mean, a median) the distance of the value from zero says nothing
about how precise it is — an age of 66 ± 7 years is "10 %" but tells a reader little — while
the group's own spread does: a mean within 10 % of the standard deviation, or box levels
within 10 % of the box plot's drawn span, place the group among its peers. Every scale comes
from public inputs only (DP sizes and the DP pilot's shape, ``pilot.GroupScales``, or values
spread evenly over the bounds when there is no pilot), never from the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dp_engine.sound.pilot import GroupScales
from dp_engine.sound.statistic import Statistic

SPREAD_LEVELS = (0.05, 0.95)
"""The box plot's whiskers: its spread is the distance between these two levels."""

BAND_LEVELS = (0.25, 0.5, 0.75)
"""The levels of a quantile release whose error is held to the band (the box)."""

SCALE_WORDS = {
    "count": "the group's size",
    "histogram": "the group's mean count per bin",
    "mean": "the group's standard deviation",
    "variance": "the group's variance",
    "quantiles": "the group's 90 % range (95th − 5th percentile), for the box (median and "
                 "quartiles)",
}
"""How each statistic's relative error is stated, in words for the panel."""


def error_scale(statistic: str, public: GroupScales, *, cells: int = 1) -> np.ndarray:
    """(groups,) the public scale relative errors of ``statistic`` are measured against."""
    statistic = Statistic.of(statistic)
    if statistic is Statistic.COUNT:
        return np.asarray(public.n_hat, dtype=float)
    if statistic is Statistic.HISTOGRAM:
        return np.asarray(public.n_hat, dtype=float) / max(int(cells), 1)
    if statistic is Statistic.MEAN:
        return np.sqrt(public.variance())
    if statistic is Statistic.VARIANCE:
        return public.variance()
    q = public.quantiles(SPREAD_LEVELS)
    return q[:, 1] - q[:, 0]


def relative(abs_error: Any, scale: Any) -> np.ndarray:
    """100 · error / scale, inf where the scale is 0 (a relative error means nothing there)."""
    err = np.asarray(abs_error, dtype=float)
    s = np.asarray(scale, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s > 0, 100.0 * err / np.where(s > 0, s, 1.0), np.inf)


def band_levels(qs: Any) -> np.ndarray:
    """Mask of the levels of ``qs`` whose error is held to the band: the box's (quartiles and
    median) when the release has any, else every level."""
    levels = np.asarray(qs, dtype=float).reshape(-1)
    box = np.isin(np.round(levels, 9), np.round(np.asarray(BAND_LEVELS), 9))
    return box if box.any() else np.ones(levels.size, dtype=bool)
