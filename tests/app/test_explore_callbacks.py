"""Explore callbacks over HTTP: roles are clamped, answers cached, bad input answered plainly."""

from __future__ import annotations

import json

import pytest

from services.identity.roles import Role
from tests.app.explore_client import render


def _trace_numbers(fig: dict) -> str:
    return json.dumps(fig.get("data", []), sort_keys=True)


def test_owner_histogram_has_figure_panel_and_realized_noise(client):
    reply = render(client)
    assert reply.status == 200, reply.text
    figs = reply.figures()
    assert len(figs) == 1
    assert {t["type"] for t in figs[0]["data"]} == {"bar"}
    assert len(figs[0]["data"]) == 5                      # one bar series per PI-RADS score
    assert "Realized noise" in reply.panel_text
    assert "e^ε" in reply.panel_text


@pytest.mark.parametrize("forged_role", ["owner", "collaborator", "admin", None, 7, ["owner"]])
def test_third_party_forging_a_role_or_paper_mode_gets_its_own_tier(client, session,
                                                                    forged_role):
    session.set(Role.THIRD_PARTY)
    honest = render(client, role="third_party")
    forged = render(client, role=forged_role, mechanism="paper", compare=True)
    assert honest.status == forged.status == 200
    assert "Realized" not in forged.panel_text and "Realized" not in forged.text
    assert "paper mode" not in forged.text.lower()
    assert "10–20 %" in forged.panel_text
    # same tier, same query -> the very same stored answer
    assert _trace_numbers(forged.figures()[0]) == _trace_numbers(honest.figures()[0])
    assert len(forged.figures()) == 1                     # compare mode refused


def test_repeating_a_request_returns_the_stored_answer_and_charges_nothing(client, session):
    session.set(Role.COLLABORATOR)
    first = render(client, role="collaborator", view="mean")
    second = render(client, role="collaborator", view="mean")
    assert _trace_numbers(first.figures()[0]) == _trace_numbers(second.figures()[0])
    assert "nothing charged" in second.panel_text
    assert "nothing charged" not in first.panel_text


def test_a_cached_answer_is_never_served_to_a_lower_tier(client, session):
    owner = render(client, view="mean")
    session.set(Role.THIRD_PARTY)
    third = render(client, role="third_party", view="mean")
    assert _trace_numbers(owner.figures()[0]) != _trace_numbers(third.figures()[0])
    assert "nothing charged" not in third.panel_text


def test_box_plot_is_drawn_from_dp_quantiles_only(client, session):
    session.set(Role.COLLABORATOR)
    reply = render(client, role="collaborator", view="median", group="Prostatitis")
    assert reply.status == 200, reply.text
    boxes = [t for t in reply.figures()[0]["data"] if t["type"] == "box"]
    assert boxes, reply.message
    for box in boxes:
        assert "y" not in box and box.get("boxpoints") is False
        assert {"q1", "median", "q3", "lowerfence", "upperfence"} <= set(box)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("dataset", "../../etc/passwd", "dataset"),
        ("dataset", {"$ne": 1}, "dataset"),
        ("view", "DROP TABLE releases", "Unknown view"),
        ("x", "Anonym_ID", "identifier"),
        ("x", "ProcedureValidatingPhysicianName", "identifier"),
        ("x", "no such column", "no column"),
        ("group", "Age", "cannot group"),
        ("view", "mean", None),  # control: a valid request answers with a figure
    ],
)
def test_bad_input_gets_a_plain_message_never_a_500(client, session, field, value, expected):
    session.set(Role.COLLABORATOR)
    kwargs = {"role": "collaborator", field: value}
    if field == "view" and value == "mean":
        kwargs["group"] = "PIRADS score"
    reply = render(client, **kwargs)
    assert reply.status == 200, reply.text
    if expected is None:
        assert reply.figures()
    else:
        assert expected.lower() in reply.message.lower(), reply.message
        assert "Traceback" not in reply.text


def test_budget_exhaustion_refuses_without_charging_and_keeps_seen_views(tmp_path):
    from app import create_app, services_of
    from tests.app.conftest import SessionAs

    app = create_app({"data_dir": tmp_path, "budgets": {"third_party": 0.3}}, seed=5)
    services = services_of(app)
    services.identity = SessionAs(Role.THIRD_PARTY)
    client = app.server.test_client()
    seen = render(client, role="third_party", view="histogram", group="none")
    assert seen.figures(), seen.message
    replies = [render(client, role="third_party", view=v, group="PIRADS score")
               for v in ("mean", "variance", "median", "histogram")]
    refused = [r for r in replies if "budget" in r.message.lower()]
    assert refused, "a tiny budget must eventually refuse"
    status = services.ledger.budget(role=Role.THIRD_PARTY, dataset_id="pirads")
    assert status.spent <= 0.3 + 1e-9
    again = render(client, role="third_party", view="histogram", group="none")
    assert _trace_numbers(again.figures()[0]) == _trace_numbers(seen.figures()[0])


def test_paper_mode_for_the_owner_is_labelled_with_its_effective_epsilon(client):
    reply = render(client, view="mean", mechanism="paper")
    assert reply.status == 200, reply.text
    assert reply.figures(), reply.message
    assert "Not differentially private as labelled" in reply.panel_text
    assert "effective" in reply.panel_text


def test_compare_mode_shows_three_nested_tiers_for_the_owner(client):
    reply = render(client, compare=True)
    assert reply.status == 200, reply.text
    assert len(reply.figures()) == 3


@pytest.mark.parametrize(
    "payload",
    [
        {"output": "..nope.children..", "outputs": [], "inputs": [], "changedPropIds": []},
        {"output": 42},
        ["not", "an", "object"],
    ],
)
def test_a_malformed_dash_request_is_a_400_never_a_500(client, payload):
    resp = client.post("/_dash-update-component", json=payload)
    assert resp.status_code == 400
    assert "Traceback" not in resp.get_data(as_text=True)


def test_non_json_body_is_refused_plainly(client):
    resp = client.post("/_dash-update-component", data=b"\x00\xff garbage",
                       content_type="application/json")
    assert 400 <= resp.status_code < 500


def test_an_unconfirmed_dataset_is_refused_to_non_owners(explore_app, client, session):
    from app import services_of

    csv = b"Age,BPH\n" + b"\n".join(f"{50 + i % 30},{'yes' if i % 3 else 'no'}".encode()
                                    for i in range(60))
    ds = services_of(explore_app).registry.add_upload("clinic.csv", csv)
    assert not ds.schema.confirmed
    session.set(Role.THIRD_PARTY)
    reply = render(client, role="third_party", dataset=ds.id, group="none")
    assert reply.status == 200
    assert reply.figures() == []
    # the same answer as for an id that does not exist: upload names cannot be probed
    unknown = render(client, role="third_party", dataset="no-such-upload", group="none")
    assert reply.message == unknown.message.replace("no-such-upload", ds.id)
    assert "There is no dataset" in reply.message
