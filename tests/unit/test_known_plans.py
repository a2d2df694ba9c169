"""Cost labels of a cached screen never plan a quantile view inline (known_plans_only)."""

from __future__ import annotations

import pytest

from dp_engine.sound.pilot import uniform_scales
from services.views import inputs
from services.views.inputs import PlanPending, known_plans_only, planned_tiers


def test_an_unknown_quantile_plan_is_pending_and_a_known_one_is_served():
    scales = uniform_scales([400.0, 900.0], 40.0, 90.0)
    key = ("v-known-plans", "median|Age|g", 1)
    with known_plans_only(), pytest.raises(PlanPending):
        planned_tiers(key, "quantiles", scales, qs=(0.5,))
    computed = planned_tiers(key, "quantiles", scales, qs=(0.5,))   # outside: computed
    with known_plans_only():
        assert planned_tiers(key, "quantiles", scales, qs=(0.5,)) is computed
    assert not getattr(inputs._local, "known_only", False)          # the flag is restored


def test_cheap_plans_are_computed_even_within():
    scales = uniform_scales([400.0, 900.0], 40.0, 90.0)
    with known_plans_only():
        tiers = planned_tiers(("v-known-plans", "mean|Age|g", 1), "mean", scales)
    assert set(tiers.tiers) == {0, 1, 2}
