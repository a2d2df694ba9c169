"""Box-plot plans are shared between workers through the ledger, number for number."""

from __future__ import annotations

import numpy as np
import pytest

from dp_engine.sound import plan_tiers
from dp_engine.sound.pilot import uniform_scales
from services.ledger.store import Ledger
from services.views import inputs, plan_store

QS = (0.25, 0.5, 0.75)


@pytest.fixture
def ledger(tmp_path):
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    yield led
    led.close()


def _same(a, b) -> None:
    assert set(a.tiers) == set(b.tiers)
    for t in a.tiers:
        x, y = a.tiers[t], b.tiers[t]
        for name in ("statistic", "noise_factor", "band", "ceiling", "reasons"):
            assert getattr(x, name) == getattr(y, name), name
        for name in ("epsilon", "expected_error", "expected_relative_error",
                     "median_relative_error", "n_candidates"):
            u, v = getattr(x, name), getattr(y, name)
            assert (u is None) == (v is None), name
            if u is not None:
                assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True), name


def test_a_plan_round_trips_exactly_withheld_groups_included():
    scales = uniform_scales([3.0, 400.0, 9000.0], 20.0, 100.0)   # the first is withheld
    tiers = plan_tiers("quantiles", scales, qs=QS)
    assert np.isnan(tiers.tiers[2].epsilon).any()
    _same(plan_store.decode(plan_store.encode(tiers)), tiers)


def test_the_key_follows_the_inputs_and_the_planning_code(monkeypatch):
    a, b = plan_store.digest(("v1", "q", 1)), plan_store.digest(("v2", "q", 1))
    assert a != b and len(a) == 64
    monkeypatch.setattr(plan_store, "code_fingerprint", lambda: "other code")
    assert plan_store.digest(("v1", "q", 1)) != a


def test_a_plan_one_worker_stored_is_read_by_another(ledger, monkeypatch):
    scales = uniform_scales([500.0, 800.0], 20.0, 100.0)
    key = ("v-shared", "median|Age|g", 1)
    monkeypatch.setattr(inputs, "_plans", {})
    first = inputs.planned_tiers(key, "quantiles", scales, store=ledger, qs=QS)
    ledger.store_plan(plan_store.digest(next(iter(inputs._plans))), "v-shared", "{}")  # kept

    def never(*_args, **_kwargs):
        raise AssertionError("planned again")

    monkeypatch.setattr(inputs, "_plans", {})                      # another worker
    monkeypatch.setattr(inputs.sound, "plan_tiers", never)
    _same(inputs.planned_tiers(key, "quantiles", scales, store=ledger, qs=QS), first)
    with pytest.raises(AssertionError, match="planned again"):    # a mean is not shared
        inputs.planned_tiers(key, "mean", scales, store=ledger)
