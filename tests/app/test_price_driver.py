"""The user controls what sets the price (issue 21 item 5).

A grouped view costs its largest group ε; the panel names the group that sets it, says what the
view costs without it and offers a button that leaves it out. Leaving it out is a new view (its
own query): it costs what the panel said, and the group is withheld with that reason. The
choice is an untrusted input like every other.
"""

from __future__ import annotations

import pytest

from layouts import ids
from layouts.explore.panel import price_driver
from services.identity.roles import Role
from services.identity.session import Identity
from services.session import Session
from services.views.answer import ViewAnswer
from services.views.plans import LEFT_OUT
from services.views.queries import ViewRequest
from tests.app.conftest import SessionAs
from tests.app.explore_client import post, render

FIG3 = {"dataset": "pirads", "role": "collaborator", "view": "mean", "x": "Age",
        "group": "PIRADS score"}


@pytest.fixture
def app(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path}, seed=11)
    services_of(app).identity = SessionAs(Role.COLLABORATOR, "carl")
    carl = Identity("carl", Role.COLLABORATOR, True)
    s = services_of(app)
    Session(s, carl).price(s.registry.get("pirads"),
                           ViewRequest("pirads", "mean", "Age", "PIRADS score", "sound",
                                       Role.COLLABORATOR))
    return app


def test_the_panel_names_the_group_that_sets_the_price_and_leaving_it_out_costs_that(app):
    client = app.server.test_client()
    shown = post(client, ids.EX_VIEW, **FIG3)
    assert shown.preview
    panel = shown.panel_text
    assert "sets this view's price" in panel and "Leave 1 out" in panel   # PI-RADS 1
    costly = float(shown.release_label.split("ε ")[1].rstrip(")"))
    without = float(panel.split("Without it the view would cost ε ")[1].split(".")[0] + "." +
                    panel.split("Without it the view would cost ε ")[1].split(".")[1][:3])
    assert without < costly / 1.25
    released = render(client, **FIG3, without=["1"])
    assert released.figures() and not released.preview
    panel = released.panel_text
    assert LEFT_OUT in panel
    from app import services_of

    charged = services_of(app).ledger.releases(dataset_id="pirads", limit=1)[0].epsilon
    assert charged == pytest.approx(without, rel=1e-3)
    # a separate view: the full one is still unreleased and keeps its price
    again = post(client, ids.EX_VIEW, **FIG3)
    assert again.preview and float(again.release_label.split("ε ")[1].rstrip(")")) == costly


def test_the_leave_out_button_adds_the_group_to_the_left_out_list(app):
    client = app.server.test_client()
    deps = client.get("/_dash-dependencies").get_json()
    dep = next(d for d in deps if any(i["id"] == ids.EX_LEAVE_OUT for i in d["inputs"]))
    values = {ids.EX_LEAVE_OUT: 1}
    states = {(ids.EX_LEAVE_OUT, "value"): "1", (ids.EX_WITHOUT, "value"): ["2"]}
    body = {"output": dep["output"], "outputs": {"id": ids.EX_WITHOUT, "property": "value"},
            "inputs": [{**i, "value": values.get(i["id"])} for i in dep["inputs"]],
            "state": [{**st, "value": states.get((st["id"], st["property"]))}
                      for st in dep["state"]],
            "changedPropIds": [f"{ids.EX_LEAVE_OUT}.n_clicks"]}
    got = client.post("/_dash-update-component", json=body).get_json()
    assert got["response"][ids.EX_WITHOUT]["value"] == ["1", "2"]


@pytest.mark.parametrize("forged", [["9"], ["1", "2", "3", "4", "5"], [1], ["x"] * 60])
def test_a_forged_left_out_list_is_refused_with_a_plain_message(app, forged):
    reply = post(app.server.test_client(), ids.EX_VIEW, **FIG3, without=forged)
    assert reply.status == 200 and not reply.figures()
    message = reply.message
    assert "Leave out only groups" in message or "Keep at least one group" in message


def test_a_left_out_value_that_is_not_a_list_is_ignored(app):
    reply = post(app.server.test_client(), ids.EX_VIEW, **FIG3, without="1; DROP")
    assert reply.status == 200 and reply.preview and LEFT_OUT not in reply.panel_text


def test_no_driver_when_the_groups_cost_about_the_same():
    ans = ViewAnswer.from_dict({
        "dataset_id": "d", "dataset_title": "", "view": "mean", "x": "a", "x_label": "a",
        "unit": "", "group": "g", "group_label": "G", "mechanism": "sound", "role": "owner",
        "tier": 0, "band": [0, 5], "epsilon": 1.0, "sensitivity": "", "mechanism_label": "m",
        "groups": ["a", "b"],
        "cells": ["mean"], "values": [[1.0], [2.0]], "ci_low": [[0.0], [1.0]],
        "ci_high": [[2.0], [3.0]], "expected_error": 0.1, "expected_relative_error": 1.0,
        "calibration_note": "", "n_estimate": 100, "group_epsilon": [1.0, 0.9],
        "withheld": [False, False]})
    assert price_driver(ans) is None
    assert price_driver(ViewAnswer.from_dict({**ans.to_dict(), "group_epsilon": [1.0, 0.5],
                                              "group_n_estimate": [30.0, 70.0]})) == (
        "a", 1.0, 0.5, 30.0)
