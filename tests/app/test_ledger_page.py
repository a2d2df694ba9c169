"""Ledger page through HTTP: owner sees and filters every release and exports CSV; no one else."""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import pytest
from dash import Dash, html
from plotly.utils import PlotlyJSONEncoder

from callbacks import ledger as ledger_callbacks
from callbacks.shell import page_for
from layouts import ids
from layouts.ledger import page as ledger_page
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger.store import Ledger
from tests.app.test_concurrency_support import answer, toy_plan, toy_release


class Session:
    """Stands in for the server session; the tests choose who is logged in."""

    def __init__(self) -> None:
        self.identity = Identity("olga", Role.OWNER, True)

    def current(self) -> Identity:
        return self.identity


@pytest.fixture
def services(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    for user, role, ds, key, eps in [
        ("olga", Role.OWNER, "prostate", "count:age", 0.5),
        ("carl", Role.COLLABORATOR, "prostate", "mean:psa", 0.25),
        ("carl", Role.COLLABORATOR, "breast", "hist:size", 0.75),
        ("tina", Role.THIRD_PARTY, "prostate", "median:age", 0.125),
    ]:
        ledger.release(toy_plan(key, role=role, eps=eps, dataset=ds, version=f"{ds}-v1"),
                       toy_release, answer({"value": 1.0, "who": user}), user=user)
    yield SimpleNamespace(ledger=ledger, identity=Session(),
                          registry=SimpleNamespace(list=lambda: []))
    ledger.close()


@pytest.fixture
def client(services):
    app = Dash(__name__, suppress_callback_exceptions=True)
    app.layout = html.Div(id=ids.PAGE)
    ledger_callbacks.register_callbacks(app, services)
    return app.server.test_client()


def _text(component) -> str:
    return json.dumps(component, cls=PlotlyJSONEncoder)


def _update(client, outputs: list[str], inputs: list[dict], state: list[dict] | None = None):
    """POST a callback the way dash-renderer does; ``outputs`` as 'id.property'."""
    specs = [dict(zip(("id", "property"), o.split("."), strict=True)) for o in outputs]
    output = outputs[0] if len(outputs) == 1 else ".." + "...".join(outputs) + ".."
    body = {"output": output, "outputs": specs[0] if len(specs) == 1 else specs,
            "inputs": inputs, "state": state or [],
            "changedPropIds": [f"{i['id']}.{i['property']}" for i in inputs]}
    return client.post("/_dash-update-component", json=body)


def _filter(client, user, dataset):
    out = [f"{ids.LEDGER_TABLE}.children", f"{ids.LEDGER_TOTALS}.children"]
    return _update(client, out, [
        {"id": ids.LEDGER_FILTER_USER, "property": "value", "value": user},
        {"id": ids.LEDGER_FILTER_DATASET, "property": "value", "value": dataset},
    ])


def _export(client, user=None, dataset=None):
    return _update(client, [f"{ids.LEDGER_DOWNLOAD}.data"],
                   [{"id": ids.LEDGER_EXPORT, "property": "n_clicks", "value": 1}],
                   [{"id": ids.LEDGER_FILTER_USER, "property": "value", "value": user},
                    {"id": ids.LEDGER_FILTER_DATASET, "property": "value", "value": dataset}])


def test_owner_page_lists_releases_totals_budgets_and_filters(services):
    text = _text(ledger_callbacks.page_view(services, services.identity.current()))
    for needle in ("mean:psa", "hist:size", "median:age", "count:age", "4 releases",
                   "Totals per user and dataset", "Budgets", "unlimited", ids.LEDGER_EXPORT,
                   "Internal releases", "drawn from the data", "Cap"):
        assert needle in text, needle
    assert text.count('"value": "carl"') == 1 and '"value": "breast"' in text  # filter options


def test_the_layout_only_draws_what_it_is_given():
    """layouts/ledger/page.py receives data and never queries: an empty page needs no ledger."""
    page = ledger_page.LedgerPage([], [], [], [], ledger_page.pd.DataFrame(
        columns=["user", "dataset_id", "releases", "epsilon", "dataset_loss", "unsound_epsilon",
                 "cache_hits", "first_release", "last_release"]), [], 0, [])
    text = _text(ledger_page.layout(page))
    assert "Nothing released yet" in text and "No internal release yet" in text


@pytest.mark.parametrize("role", [Role.COLLABORATOR, Role.THIRD_PARTY])
def test_non_owner_page_is_a_refusal_without_data(services, role):
    text = _text(page_for(services, Identity("carl", role, True), "/ledger"))
    assert "data owner" in text
    assert "mean:psa" not in text and "tina" not in text and ids.LEDGER_EXPORT not in text


def test_unauthenticated_owner_identity_is_refused(services):
    text = _text(page_for(services, Identity("anonymous", Role.OWNER, False), "/ledger"))
    assert "data owner" in text and "count:age" not in text


def test_filter_by_user_and_dataset(client):
    res = _filter(client, "carl", None)
    table = _text(res.json["response"][ids.LEDGER_TABLE]["children"])
    assert "mean:psa" in table and "hist:size" in table
    assert "count:age" not in table and "median:age" not in table
    totals = _text(res.json["response"][ids.LEDGER_TOTALS]["children"])
    assert "carl" in totals and "tina" not in totals
    res = _filter(client, "carl", "breast")
    table = _text(res.json["response"][ids.LEDGER_TABLE]["children"])
    assert "hist:size" in table and "mean:psa" not in table and "1 release." in table


@pytest.mark.parametrize("forged", [["carl"], {"x": 1}, 3, ""])
def test_malformed_filter_values_mean_no_filter(client, forged):
    res = _filter(client, forged, forged)
    assert res.status_code == 200
    assert "4 releases" in _text(res.json["response"][ids.LEDGER_TABLE]["children"])


def test_filter_callback_refuses_non_owner(client, services):
    services.identity.identity = Identity("carl", Role.COLLABORATOR, True)
    res = _filter(client, None, None)
    text = _text(res.json["response"])
    assert "data owner" in text and "mean:psa" not in text and "olga" not in text


def test_csv_export_for_owner_with_filters(client):
    data = _export(client).json["response"][ids.LEDGER_DOWNLOAD]["data"]
    assert data["filename"].startswith("ledger-") and data["filename"].endswith(".csv")
    rows = list(csv.DictReader(io.StringIO(data["content"])))
    assert [r["query_key"].split("|")[0] for r in rows] == ["count:age", "mean:psa",
                                                            "hist:size", "median:age"]
    data = _export(client, user="carl", dataset="prostate").json["response"][
        ids.LEDGER_DOWNLOAD]["data"]
    rows = list(csv.DictReader(io.StringIO(data["content"])))
    assert [(r["user"], r["query_key"]) for r in rows] == [("carl",
                                                            "mean:psa|as=collaborator")]
    assert "prostate" in data["filename"] and "carl" in data["filename"]


def test_csv_export_refused_to_non_owner(client, services):
    services.identity.identity = Identity("tina", Role.THIRD_PARTY, True)
    res = _export(client)
    # nothing is sent: no download data, no ledger content (Dash answers 204 or an empty update)
    assert res.status_code in (200, 204)
    assert ids.LEDGER_DOWNLOAD not in res.text and "count:age" not in res.text
