"""Sound mode: central differential privacy on released statistics only.

Neighbouring data sets differ by adding or removing one patient, so the number
of records n is private. Bounds, categories and bins are public metadata
(the dataset schema), never read from the data.

* statistics (``statistics``): count, histogram, mean, variance, quantiles and
  their grouped versions, each returning a ``Release`` (value, ε, mechanism,
  public parameters, expected error and 95 % interval from public inputs only);
* mechanisms (``mechanisms``): laplace / discrete_laplace (floating-point safe),
  gaussian, bounded_laplace, randomized_response, exponential;
* aggregates (``aggregates``): the sufficient statistics a data source computes
  (cell counts, exact lattice sums, quantile-candidate counts), defined bit for bit;
* ``calibrate``: ε for a noise factor from the public accuracy map;
* ``refine`` / ``refine_tier`` (``tiers``): nested, noisier tiers by post-processing.
"""

from dp_engine.sound.calibrate import Calibration, calibrate, expected_relative_error
from dp_engine.sound.mechanisms import (
    bounded_laplace,
    discrete_laplace,
    exponential,
    gaussian,
    laplace,
    randomized_response,
)
from dp_engine.sound.release import Release
from dp_engine.sound.statistics import (
    count,
    grouped_histogram,
    grouped_mean,
    grouped_quantiles,
    grouped_variance,
    histogram,
    mean,
    quantiles,
    variance,
)
from dp_engine.sound.tiers import refine, refine_tier

__all__ = [
    "Calibration",
    "Release",
    "calibrate",
    "expected_relative_error",
    "refine",
    "refine_tier",
    "bounded_laplace",
    "count",
    "grouped_histogram",
    "grouped_mean",
    "grouped_quantiles",
    "grouped_variance",
    "histogram",
    "mean",
    "quantiles",
    "variance",
    "discrete_laplace",
    "exponential",
    "gaussian",
    "laplace",
    "randomized_response",
]
