"""The privacy audit MUST catch paper mode's mean at its labelled ε.

PyDPLib noises every record with Lap(S_f/ε), S_f = (b − a)/n, and releases the mean of
the noised records. One record moves the sum by up to b − a = n·S_f, i.e. n noise
scales, so the mean's real loss is up to n·ε (``effective_epsilon``). The labelled ε is
fixed here (``epsilons=[ε]``) so the ε search plays no part: the leak is the noise
calibration itself. Divisibility events are switched off (``bit_events=False``) so the
catch is made by a plain threshold on the released mean, not by float artefacts.

For a correct mechanism the auditor errs with probability ≤ α = 1e-5 per test; these
audits assert the opposite (a violation), at fixed seeds.
"""

from __future__ import annotations

import os

import numpy as np

from dp_engine.audit import AuditResult, audit_scalar, looped
from dp_engine.paper import dp_calculate, effective_epsilon
from dp_engine.paper.fit import sensitivity_from
from dp_engine.paper.search import NoiseProbe, unit_laplace

ALPHA = 1e-5
N = 20
# Values in [0, 1] with both ends present, so the data-derived range is the same for D and D'.
D = np.array([0.0] * (N - 1) + [1.0])


def show(result: AuditResult) -> None:
    print(f"AUDIT {os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]} {result.summary()}")


def released_mean(values: np.ndarray, eps: float):
    """One dp_calculate call (mean, fixed ε) per run; the release is the noised records' mean."""
    return looped(lambda rng: np.mean(dp_calculate(values, 2, 0, epsilons=[eps], rng=rng).dp_data))


def test_paper_mean_is_caught_at_its_labelled_epsilon():
    """Add-one neighbours, the full dp_calculate path: ε_lb far above the labelled ε."""
    eps = 0.5
    added = np.append(D, 1.0)
    result = audit_scalar(
        released_mean(D, eps),
        released_mean(added, eps),
        eps,
        n_runs=3_000,
        alpha=ALPHA,
        rng=np.random.default_rng(301),
        bit_events=False,
    )
    show(result)
    assert result.violated, f"paper mode not caught: {result.summary()}"
    assert result.epsilon_lower_bound > 2 * eps


def vectorized_mean(values: np.ndarray, eps: float):
    """The paper's own noising step (unit Laplace, NoiseProbe.release) on many copies at once."""
    n = values.size
    sens = sensitivity_from(2, float(values.max() - values.min()), n)

    def sample(rng: np.random.Generator, runs: int) -> np.ndarray:
        tiled = np.tile(values, runs)
        probe = NoiseProbe(tiled, "float", False, unit_laplace(rng, 1, tiled.size))
        return probe.release(tiled, sens / eps).reshape(runs, n).mean(axis=1)

    return sample


def test_paper_mean_leak_lies_between_the_label_and_n_times_epsilon():
    """Replace-one neighbours with a fixed range: ε < ε_lb ≤ n·ε = effective_epsilon.

    The lower side is the catch; the upper side checks that the auditor does not
    overshoot the loss the paper module itself reports for this case.
    """
    eps = 0.25
    replaced = D.copy()
    replaced[0] = 1.0
    result = audit_scalar(
        vectorized_mean(D, eps),
        vectorized_mean(replaced, eps),
        eps,
        n_runs=200_000,
        alpha=ALPHA,
        rng=np.random.default_rng(302),
        bit_events=False,
    )
    show(result)
    effective = effective_epsilon(2, eps, N)
    assert effective == N * eps
    assert result.violated and result.epsilon_lower_bound > 4 * eps
    assert result.epsilon_lower_bound <= effective
