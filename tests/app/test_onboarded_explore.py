"""A freshly proposed schema (constant column, site codes, missing codes, labelled 1/2 codes,
0_no/1_yes) renders on Explore.

The owner explores an unconfirmed upload before confirming it: every view answers with a
figure or a plain message, never a server error.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from tests.app.explore_client import render


@pytest.fixture
def upload_id(explore_app) -> str:
    from app import services_of

    rng = np.random.default_rng(11)
    table = load_diabetes(scaled=False, as_frame=True).frame[["age", "bmi", "s3"]].head(120)
    table = table.assign(m=1, site=rng.integers(1, 5, 120),
                         stage=rng.choice(["T1", "T2", "NA_NA"], 120))
    table.loc[::30, "s3"] = 999
    content = table.to_csv(index=False).encode()
    return services_of(explore_app).registry.add_upload("nodal.csv", content).id


@pytest.mark.parametrize("view, x, group", [
    ("histogram", "m", "none"), ("histogram", "bmi", "site"), ("mean", "s3", "site"),
    ("median", "age", "stage"), ("histogram", "site", "none"),
])
def test_owner_views_of_a_proposed_schema_draw(client, upload_id, view, x, group):
    reply = render(client, dataset=upload_id, view=view, x=x, group=group)
    assert reply.status == 200 and len(reply.figures()) == 1, reply.text[:300]


def test_a_mean_of_the_constant_column_asks_for_bounds(client, upload_id):
    reply = render(client, dataset=upload_id, view="mean", x="m", group="none")
    assert reply.status == 200 and reply.figures() == []
    assert "'m' has no public lower/upper bounds" in reply.message


@pytest.fixture
def survival_id(explore_app) -> str:
    from app import services_of
    from tests.app.clinical_standins import csv_bytes, survival_table, trial_table

    registry = services_of(explore_app).registry
    table = survival_table().assign(bleed=trial_table(228)["bleed"].to_numpy())
    return registry.add_upload("survival.csv", csv_bytes(table)).id


@pytest.mark.parametrize("view, x, group, label", [
    ("histogram", "sex", "none", "2 = female"), ("mean", "age", "sex", "1 = male"),
    ("histogram", "bleed", "status", "2 = event"), ("median", "time", "bleed", "Yes"),
])
def test_labelled_codes_and_coded_yes_no_draw_with_their_labels(client, survival_id, view, x,
                                                               group, label):
    reply = render(client, dataset=survival_id, view=view, x=x, group=group)
    assert reply.status == 200 and len(reply.figures()) == 1, reply.text[:300]
    assert label in json.dumps(reply.figures()), label
