"""A dataset version's privacy calibration is drawn once, when the owner confirms its schema
(issue 21 item 1): the DP number of records and a DP pilot of each numeric column, added to the
dataset's loss (the reserved slice the accounting note states), charged to no role, and
public from then on: no later request draws it."""

from __future__ import annotations

import pytest

from services.data.registry import SAMPLE_CSV
from services.identity.roles import Role
from services.views.inputs import calibration_epsilon, calibration_specs, size_key


@pytest.fixture
def services(tmp_path):
    from app import create_app, services_of

    return services_of(create_app({"data_dir": tmp_path}, seed=8))


def test_confirming_a_schema_draws_the_calibration_once(services):
    ds = services.registry.add_upload("export.csv", SAMPLE_CSV.read_bytes())
    assert services.ledger.internal(ds.version, size_key(None)) is None
    for spec in ds.schema.columns:                       # accept what was proposed
        if spec.derived_from_data:
            services.registry.confirm_columns(ds.id, [spec.name])
    confirmed = services.registry.confirm_schema(ds.id)
    assert services.ledger.internal(confirmed.version, size_key(None)) is not None
    reserved = calibration_epsilon(confirmed)
    assert reserved == pytest.approx(sum(s.epsilon for s in calibration_specs(confirmed)))
    assert services.ledger.dataset_loss(ds.id) == pytest.approx(reserved)
    for role in Role:
        assert services.ledger.budget(role=role, dataset_id=ds.id).spent == 0.0
    services.registry.confirm_schema(ds.id)              # again: nothing more drawn
    assert services.ledger.dataset_loss(ds.id) == pytest.approx(reserved)
