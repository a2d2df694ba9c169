"""Gradual release passes the auditor at the less noisy tier's ε (issue 21 item 1).

A third party's tier drawn first and a collaborator's tier sharpened from it afterwards must,
together, be no more revealing than the collaborator's tier alone: the pair is audited at
ε1 on add/remove-one neighbours (a count of c and c + 1, the worst case of a sensitivity-1
statistic). The control shows the audit can fail: the same two tiers drawn independently
(basic composition, loss ε1 + ε2) are flagged at ε1.
"""

from __future__ import annotations

import numpy as np

from dp_engine.audit import audit_vector
from dp_engine.sound import grouped_histogram
from dp_engine.sound.gradual import between, insert, no_noise
from dp_engine.sound.mechanisms import dlap_noise
from dp_engine.sound.tiers import zero_probability
from tests.audit.test_statistics import ALPHA, assert_sound

E1, E2 = 1.0, 0.5          # collaborator's and third party's ε
RUNS = 200_000
BOTH = {"the smaller of the two tiers": lambda y: y.min(axis=1)}
"""Both tiers above the count at once: the event where independent draws lose ε1 + ε2."""


def _sharpened(count: int):
    t1, t2 = 1 / E1, 1 / E2
    pi = zero_probability(t1, t2, True)

    def sample(rng: np.random.Generator, n: int) -> np.ndarray:
        noisier = count + dlap_noise(np.full(n, t2), (n,), rng)           # drawn first
        better = between(np.full(n, float(count)), noisier, t1, 0.0, t2, pi, rng)
        return np.stack([better, noisier], axis=1)

    return sample


def _independent(count: int):
    def sample(rng: np.random.Generator, n: int) -> np.ndarray:
        return np.stack([count + dlap_noise(np.full(n, 1 / E1), (n,), rng),
                         count + dlap_noise(np.full(n, 1 / E2), (n,), rng)], axis=1)

    return sample


def test_a_sharpened_pair_costs_the_less_noisy_epsilon():
    result = audit_vector(_sharpened(5), _sharpened(6), E1, n_runs=RUNS, alpha=ALPHA,
                          rng=np.random.default_rng(20261126), statistics=BOTH)
    assert_sound(result)


def test_two_independent_draws_are_flagged_at_the_less_noisy_epsilon():
    """The control: basic composition really costs more than ε1, and the auditor sees it."""
    result = audit_vector(_independent(5), _independent(6), E1, n_runs=RUNS, alpha=ALPHA,
                          rng=np.random.default_rng(20261126), statistics=BOTH)
    assert result.violated, result.summary()


def _three_tiers_out_of_order(values: np.ndarray):
    """Tier 2 drawn first, then tier 0 sharpened from it, then tier 1 bridged between them:
    the order in which a third party, the owner and a collaborator may ask. Vectorized: n
    replica groups each hold a copy of the data (groups are released independently)."""
    eps = {0: 2.0, 1: 1.0, 2: 0.5}

    def sample(rng: np.random.Generator, n: int) -> np.ndarray:
        groups = np.repeat(np.arange(n), values.size)
        rows = np.tile(values, n)
        keys = list(range(n))

        def release(at: float, gen) -> object:
            return grouped_histogram(rows, groups, np.array([0.0, 1.0, 2.0]), keys,
                                     [at] * n, rng=gen)

        t2 = release(eps[2], rng)
        base0 = release(eps[0], no_noise())
        t0 = insert(base0, more=t2, truth=base0.noisy, rng=rng)
        t1 = insert(release(eps[1], no_noise()), less=t0, more=t2, rng=rng)
        return np.stack([np.asarray(t1.noisy["count"])[:, 0],
                         np.asarray(t2.noisy["count"])[:, 0]], axis=1)

    return sample


def test_collaborator_and_third_party_tiers_cost_the_collaborators_epsilon():
    """What the two non-owner roles hold together after the owner's tier came in between
    (tier 1 bridged between tier 0 and tier 2) is audited at ε1 = 1: a patient added to
    the first bin."""
    d = np.array([0.5] * 3 + [1.5] * 2)
    d_prime = np.append(d, 0.5)
    result = audit_vector(_three_tiers_out_of_order(d), _three_tiers_out_of_order(d_prime),
                          1.0, n_runs=RUNS, alpha=ALPHA, rng=np.random.default_rng(7),
                          statistics=BOTH)
    assert_sound(result)
