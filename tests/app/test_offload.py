"""Uncached releases answered by a child process (COHORT_OFFLOAD_UNCACHED=1): same door,
one ledger row, refusals as they are, cached answers inline."""

from __future__ import annotations

import os

import pytest

from dp_engine.errors import BudgetExceededError
from services.identity.roles import Role
from services.identity.session import Identity
from services.views.queries import ViewRequest

COLLAB = Identity("carl", Role.COLLABORATOR, True)
REQ = ViewRequest("pirads", "mean", "Age", "PIRADS score", "sound", Role.COLLABORATOR)


@pytest.fixture
def services(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path, "offload_uncached": True,
                      "budgets": {"third_party": 0.01}})
    s = services_of(app)
    yield s
    s.releases.offload.close()


def test_an_uncached_release_is_drawn_by_the_child_and_recorded_once(services):
    first = services.releases.answer(COLLAB, REQ)
    pool = services.releases.offload._pool
    assert pool is not None
    (child,) = pool._processes.values()
    assert child.pid != os.getpid()
    (row,) = services.ledger.releases(dataset_id="pirads")
    assert row.epsilon == pytest.approx(first.epsilon_charged) and first.epsilon_charged > 0
    assert first.realized_noise_percent is None and not first.cached
    again = services.releases.answer(COLLAB, REQ)        # cached: served inline, free
    assert again.cached and again.epsilon_charged == 0 and again.values == first.values
    assert len(services.ledger.releases(dataset_id="pirads")) == 1


def test_a_refusal_in_the_child_comes_back_as_a_refusal(services):
    third = Identity("tina", Role.THIRD_PARTY, True)
    req = ViewRequest("pirads", "histogram", "Age", "PIRADS score", "sound", Role.THIRD_PARTY)
    with pytest.raises(BudgetExceededError, match="Nothing was charged"):
        services.releases.answer(third, req)
    assert services.ledger.releases(dataset_id="pirads") == []
