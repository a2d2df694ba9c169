"""Nested tiers through the release service: exact marginals and no extra information.

For many fresh dataset versions, the service materializes the owner tier, refines it to the
collaborator tier and that to the third-party tier. We read the raw noisy counts the ledger's
tier store keeps server-side and check, at fixed seeds:
- each tier's noise has exactly the discrete-Laplace law of a fresh release at its ε
  (chi-square against the exact pmf);
- the third party's value is the collaborator's plus independent noise: the increment is
  uncorrelated with the collaborator's noise, so the pair tells no more than the
  collaborator's answer alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_engine.schema import ColumnKind, ColumnSpec, Schema
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger.store import Ledger
from services.views.queries import ViewRequest
from services.views.releases import ReleaseService, new_rng_factory

RUNS = 250
ALPHA = 1e-4
TRUE_COUNT = 30


@dataclass(frozen=True)
class _Dataset:
    id: str
    title: str
    version: str
    frame: pd.DataFrame
    schema: Schema


class _Registry:
    """A registry whose dataset gets a new version on every call to ``bump``."""

    def __init__(self) -> None:
        frame = pd.DataFrame({"BPH": ["yes"] * TRUE_COUNT + ["no"] * 50})
        schema = Schema("toy", (ColumnSpec("BPH", ColumnKind.CATEGORICAL,
                                           categories=("yes", "no")),), confirmed=True)
        self.ds = _Dataset("toy", "Toy", "v0", frame, schema)

    def bump(self, i: int) -> None:
        self.ds = _Dataset("toy", "Toy", f"v{i}", self.ds.frame, self.ds.schema)

    def get(self, dataset_id: str) -> _Dataset:
        return self.ds


def _dlap_pmf(k: np.ndarray, scale: float) -> np.ndarray:
    a = math.exp(-1.0 / scale)
    return (1 - a) / (1 + a) * a ** np.abs(k)


def _chi_square_p(samples: np.ndarray, scale: float) -> float:
    """p-value of samples against DiscreteLaplace(scale), tails pooled to expected >= 5."""
    lim = 0
    while RUNS * _dlap_pmf(np.array([lim + 1]), scale)[0] >= 5:
        lim += 1
    ks = np.arange(-lim, lim + 1)
    expected = RUNS * _dlap_pmf(ks, scale)
    observed = np.array([(samples == k).sum() for k in ks], dtype=float)
    tail_exp = RUNS - expected.sum()
    tail_obs = RUNS - observed.sum()
    return stats.chisquare(np.append(observed, tail_obs), np.append(expected, tail_exp)).pvalue


@pytest.fixture(scope="module")
def tier_noise(tmp_path_factory):
    registry = _Registry()
    ledger = Ledger(f"sqlite:///{tmp_path_factory.mktemp('tiers') / 'ledger.sqlite'}")
    service = ReleaseService(registry, ledger, rng_factory=new_rng_factory(7))
    who = Identity("auditor", Role.OWNER, True)
    noise = {0: [], 1: [], 2: []}
    scales: dict[int, float] = {}
    for i in range(RUNS):
        registry.bump(i)
        for role in (Role.OWNER, Role.COLLABORATOR, Role.THIRD_PARTY):
            req = ViewRequest("toy", "histogram", "BPH", None, "sound", role)
            service.answer(who, req, price=True)
            rel = ledger.tier(f"v{i}", req.query_key(registry.ds.schema), role.noise_factor)
            noise[role.noise_factor].append(float(np.ravel(rel.noisy["count"])[0]) - TRUE_COUNT)
            scales[role.noise_factor] = float(np.ravel(rel.scales["count"])[0])  # one group
    return {t: np.asarray(v) for t, v in noise.items()}, scales


def test_tiers_get_noisier_and_each_has_its_exact_law(tier_noise):
    noise, scales = tier_noise
    assert scales[0] < scales[1] < scales[2]
    for tier in (0, 1, 2):
        assert np.all(noise[tier] == np.round(noise[tier]))      # integer noise
        assert _chi_square_p(noise[tier], scales[tier]) > ALPHA, tier


def test_third_party_is_collaborator_plus_independent_noise(tier_noise):
    noise, _ = tier_noise
    increment = noise[2] - noise[1]
    r, p = stats.pearsonr(noise[1], increment)
    assert p > ALPHA, (r, p)
    # the increment is not itself zero: the tiers really differ
    assert np.mean(increment != 0) > 0.5
