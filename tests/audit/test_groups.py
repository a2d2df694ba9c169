"""Privacy audits of the aggregate releases: per-group ε, every quantile mechanism, and the
per-patient contribution bound.

Each audit releases from aggregates computed once and replicated (one replica per run, all
in one vectorized call), on a worst-case neighbouring pair, and asks the Clopper–Pearson
auditor for a lower bound on ε. A correct release is flagged with probability ≤ α = 1e-5.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from dp_engine.audit import AuditResult, audit_vector
from dp_engine.sound import (
    CandidateCounts,
    CellCounts,
    MomentSums,
    candidate_counts,
    cell_counts,
    moment_sums,
    release_counts,
    release_moments,
    release_quantiles,
)

ALPHA = 1e-5
RUNS = 40_000
EDGES = np.array([0.0, 1.0, 2.0, 3.0])
LOWER, UPPER = 0.0, 3.0
KEYS = ["small", "large"]
EPS = np.array([0.8, 0.3])          # the smallest group has the larger ε; the view costs 0.8


def assert_sound(result: AuditResult) -> None:
    print(f"AUDIT {os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]} {result.summary()}")
    assert not result.violated, f"privacy violation: {result.summary()}"


def audit(sample_d, sample_p, eps: float, seed: int, runs: int = RUNS) -> AuditResult:
    return audit_vector(sample_d, sample_p, eps, n_runs=runs, alpha=ALPHA,
                        rng=np.random.default_rng(seed))


def grouped(values: list[float], groups: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(values, dtype=float), np.asarray(groups, dtype=object)


# D: one record in the small group, three in the large one; D' adds one record at the upper
# bound to the small group (its size goes from 1 to 2).
D = grouped([0.5, 1.5, 2.5, 0.2], ["small", "large", "large", "large"])
D_PRIME = grouped([0.5, 1.5, 2.5, 0.2, 3.0], ["small", "large", "large", "large", "small"])


def tile_eps(n: int) -> np.ndarray:
    return np.tile(EPS, n)


def histogram_sampler(data):
    cells = cell_counts(data[0], EDGES, groups=data[1], group_keys=KEYS).counts

    def sample(rng, n):
        rel = release_counts(CellCounts(np.tile(cells, (n, 1))), tile_eps(n), rng=rng,
                             group_keys=list(range(2 * n)))
        return np.asarray(rel.value, dtype=float).reshape(n, -1)

    return sample


def moment_sampler(data, statistic):
    s = moment_sums(data[0], LOWER, UPPER, squares=True, groups=data[1], group_keys=KEYS)

    def sample(rng, n):
        tiled = MomentSums(LOWER, UPPER, np.tile(s.count, n), np.tile(s.s1, n),
                           np.tile(s.s2, n))
        rel = release_moments(tiled, tile_eps(n), rng=rng, statistic=statistic,
                              group_keys=list(range(2 * n)))
        return np.asarray(rel.value, dtype=float).reshape(n, -1)

    return sample


def quantile_sampler(data, method, qs=(0.5,)):
    c = candidate_counts(data[0], LOWER, UPPER, 7, groups=data[1], group_keys=KEYS)

    def sample(rng, n):
        tiled = CandidateCounts(LOWER, UPPER, 7, np.tile(c.counts, (n, 1)))
        rel = release_quantiles(tiled, tile_eps(n), qs=qs, rng=rng, method=method,
                                group_keys=list(range(2 * n)))
        return np.asarray(rel.value, dtype=float).reshape(n, -1)

    return sample


SAMPLERS = {
    "histogram": histogram_sampler,
    "mean": lambda d: moment_sampler(d, "mean"),
    "variance": lambda d: moment_sampler(d, "variance"),
    "quantiles cdf": lambda d: quantile_sampler(d, "cdf"),
    "quantiles joint": lambda d: quantile_sampler(d, "joint", (0.25, 0.75)),
    "quantiles independent": lambda d: quantile_sampler(d, "independent"),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_per_group_epsilon_release_is_private_at_what_it_charges(name):
    """Groups with their own ε (0.8 for the small group, 0.3 for the large one): the view is
    charged max ε_g = 0.8, and adding a patient to the smallest group must not break that.
    The ε_g are public inputs, identical on D and D' (they never depend on the true sizes)."""
    make = SAMPLERS[name]
    charged = float(EPS.max())
    result = audit(make(D), make(D_PRIME), charged, seed=401)
    assert_sound(result)
    if name in ("histogram", "quantiles independent"):
        # the small group's own ε is what the change can show: the auditor sees most of it
        assert result.epsilon_lower_bound > 0.4 * EPS[0]


def test_cdf_tree_nodes_are_private_with_power():
    """The whole noisy tree (what a CDF release keeps to refine its tiers) is ε-DP: a
    record moves one node per level by 1, and each node has noise k·levels/ε."""
    eps = 1.0

    def sample(data):
        c = candidate_counts(data, LOWER, UPPER, 7).counts

        def draw(rng, n):
            rel = release_quantiles(CandidateCounts(LOWER, UPPER, 7, np.tile(c, (n, 1))), eps,
                                    qs=(0.5,), rng=rng, group_keys=list(range(n)))
            return np.asarray(rel.noisy["tree7"], dtype=float)

        return draw

    result = audit(sample(np.array([0.5, 2.0])), sample(np.array([0.5, 2.0, 3.0])), eps,
                   seed=402)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.5 * eps


# --- the unit of privacy: a patient with five rows, at most two kept ----------------------

PATIENTS = np.array(["p1", "p2", "p3"], dtype=object)
OTHERS = np.array([0.4, 1.2, 2.2])
NEW_ROWS = np.array([2.9, 2.9, 2.8, 2.95, 2.99])     # all near the top: the worst case
K = 2


def bounded_sampler(with_patient: bool, statistic: str, k: int = K, claimed_k: int = K):
    values = np.concatenate([OTHERS, NEW_ROWS]) if with_patient else OTHERS
    patients = np.concatenate([PATIENTS, ["p9"] * 5]) if with_patient else PATIENTS

    def sample(rng, n):
        if statistic == "histogram":
            cells = cell_counts(values, EDGES, patients=patients, max_rows_per_patient=k)
            rel = release_counts(CellCounts(np.tile(cells.counts, (n, 1)), claimed_k), 1.0,
                                 rng=rng, group_keys=list(range(n)))
        elif statistic == "mean":
            s = moment_sums(values, LOWER, UPPER, squares=False, patients=patients,
                            max_rows_per_patient=k)
            rel = release_moments(MomentSums(LOWER, UPPER, np.tile(s.count, n),
                                             np.tile(s.s1, n), None, claimed_k), 1.0,
                                  rng=rng, group_keys=list(range(n)))
        else:
            c = candidate_counts(values, LOWER, UPPER, 7, patients=patients,
                                 max_rows_per_patient=k)
            rel = release_quantiles(CandidateCounts(LOWER, UPPER, 7, np.tile(c.counts, (n, 1)),
                                                    claimed_k), 1.0, qs=(0.5,), rng=rng,
                                    group_keys=list(range(n)))
            return np.asarray(rel.noisy["tree7"], dtype=float)
        return np.asarray(rel.value, dtype=float).reshape(n, -1)

    return sample


@pytest.mark.parametrize("statistic", ["histogram", "mean", "quantiles"])
def test_a_patient_with_five_rows_bounded_to_two_is_private(statistic):
    """Neighbours add or remove the whole patient (five rows); with k = 2 rows kept and every
    sensitivity scaled by 2, the release keeps its ε = 1."""
    result = audit(bounded_sampler(False, statistic), bounded_sampler(True, statistic), 1.0,
                   seed=403)
    assert_sound(result)
    assert result.epsilon_lower_bound > 0.3


def test_the_contribution_bound_is_what_makes_it_private():
    """Control: the same two rows released as if each patient had one row (sensitivity 1)
    leak about twice the claimed ε, and the auditor says so."""
    result = audit(bounded_sampler(False, "histogram", claimed_k=1),
                   bounded_sampler(True, "histogram", claimed_k=1), 1.0, seed=404)
    assert result.violated, result.summary()
