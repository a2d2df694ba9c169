"""Sound mode: central differential privacy on released statistics only.

Neighbouring data sets differ by adding or removing one patient, so the number
of records n is private. Bounds, categories and bins are public metadata
(the dataset schema), never read from the data.

* statistics (``statistics``): count, histogram, mean, variance, quantiles and
  their grouped versions, each returning a ``Release`` (value, ε, mechanism,
  public parameters, expected error and 95 % interval from public inputs only);
* mechanisms (``mechanisms``): laplace (floating-point safe), bounded_laplace,
  randomized_response, exponential;
* aggregates (``aggregates``): the sufficient statistics a data source computes
  (cell counts, exact lattice sums, quantile-candidate counts), defined bit for bit;
* ``releases``: the noise on aggregates (``release_counts``, ``release_moments``,
  ``release_quantiles``), one ε or one ε per group; ``truth``: the owner's true values
  from the same aggregates; ``quantile_mechanisms``: noisy CDF, JointExp, per-level EM;
* ``pilot``: DP group sizes and the DP pilot (public scales); ``plan``: per-group ε for a
  role's band under a ceiling, with withheld groups, nested across tiers;
* ``refine`` / ``refine_tier`` (``tiers``): nested, noisier tiers by post-processing.
"""

from dp_engine.sound.aggregates import (
    CandidateCounts,
    CellCounts,
    MomentSums,
    bound_contributions,
    candidate_counts,
    cell_counts,
    coarsen,
    moment_sums,
)
from dp_engine.sound.mechanisms import (
    bounded_laplace,
    exponential,
    laplace,
    randomized_response,
)
from dp_engine.sound.pilot import (
    CALIBRATION_PILOT_EPSILON,
    CALIBRATION_SIZE_EPSILON,
    PILOT_EPSILON,
    GroupScales,
    group_size_epsilon,
    pilot_edges,
    pooled_scales,
    public_group_sizes,
    scales_from_pilot,
    uniform_scales,
)
from dp_engine.sound.plan import (
    DEFAULT_CEILINGS,
    WITHHELD_REASON,
    GroupPlan,
    TierPlan,
    plan_groups,
    plan_tiers,
    release_group_sizes,
    release_pilot,
)
from dp_engine.sound.release import Release
from dp_engine.sound.releases import release_counts, release_moments, release_quantiles
from dp_engine.sound.statistic import Statistic
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
from dp_engine.sound.truth import (
    realized_relative_error,
    true_counts,
    true_means,
    true_quantiles,
    true_variances,
)

__all__ = [
    "CALIBRATION_PILOT_EPSILON",
    "CALIBRATION_SIZE_EPSILON",
    "DEFAULT_CEILINGS",
    "Statistic",
    "PILOT_EPSILON",
    "WITHHELD_REASON",
    "CandidateCounts",
    "CellCounts",
    "GroupPlan",
    "GroupScales",
    "MomentSums",
    "TierPlan",
    "bound_contributions",
    "candidate_counts",
    "cell_counts",
    "coarsen",
    "group_size_epsilon",
    "moment_sums",
    "pilot_edges",
    "pooled_scales",
    "plan_groups",
    "plan_tiers",
    "public_group_sizes",
    "realized_relative_error",
    "release_counts",
    "release_group_sizes",
    "release_pilot",
    "release_moments",
    "release_quantiles",
    "scales_from_pilot",
    "true_counts",
    "true_means",
    "true_quantiles",
    "true_variances",
    "uniform_scales",
    "Release",
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
    "exponential",
    "laplace",
    "randomized_response",
]
