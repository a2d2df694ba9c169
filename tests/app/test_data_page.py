"""Data page: uploads, schema review and confirmation — owner only, every bad input a message."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import pytest
from dash import Dash, html, no_update
from hypothesis import HealthCheck, given, settings
from plotly.utils import PlotlyJSONEncoder

from callbacks import data as data_callbacks
from callbacks.shell import page_for
from layouts import ids
from layouts.data import page as data_page
from services.data import decisions
from services.data.registry import DatasetRegistry
from services.identity.roles import Role
from services.identity.session import Identity
from tests.app.conftest import SessionAs
from tests.app.test_datasets_fuzz import messy_csv

GOOD = b"Age;Ward;BPH\n61,5;A;ja\n70;B;nein\n55;A;ja\n"


@pytest.fixture
def services(tmp_path):
    return SimpleNamespace(registry=DatasetRegistry(tmp_path / "store", max_upload_bytes=20_000),
                           identity=SessionAs(Role.OWNER, "olga"))


def _text(component) -> str:
    return json.dumps(component, cls=PlotlyJSONEncoder)


def data_url(content: bytes) -> str:
    return "data:text/csv;base64," + base64.b64encode(content).decode()


def upload(services, content: bytes, filename: str = "ward.csv"):
    return data_callbacks.handle(services, ids.DATA_UPLOAD, data_url(content), filename,
                                 "pirads", None)


def click(services, button: str, selected: str, rows, ticks=None):
    return data_callbacks.handle(services, button, None, None, selected, rows, None, ticks)


def tokens(services, dataset: str, *keys: str) -> list[list[str]]:
    """The tick values the browser sends when the owner ticks the boxes ``keys``."""
    ds = services.registry.get(dataset)
    listed = decisions.checklist(ds.schema, ds.load_report.review)
    return [[d.token] for d in listed if d.key in keys]


def ids_of(services) -> list[str]:
    return [d.id for d in services.registry.list()]


# --- layout --------------------------------------------------------------------------
def test_owner_layout_shows_upload_list_schema_and_confirm(services):
    text = _text(data_page.layout(services.registry, services.identity.current()))
    for needle in (ids.DATA_UPLOAD, ids.DATA_MESSAGE, ids.DATA_TABLE, ids.DATA_CONFIRM,
                   ids.DATA_LIST, "PI-RADS cohort", "confirmed", "never shown to non-owners"):
        assert needle in text, needle


@pytest.mark.parametrize("identity", [
    Identity("carl", Role.COLLABORATOR, True), Identity("tina", Role.THIRD_PARTY, True),
    Identity("anonymous", Role.OWNER, False),
])
def test_layout_refuses_non_owners(services, identity):
    text = _text(page_for(services, identity, "/data"))
    assert "owner" in text and ids.DATA_TABLE not in text and "Anonym_ID" not in text


# --- uploads -------------------------------------------------------------------------
def test_good_upload_is_selected_with_flagged_columns(services):
    msg, overview, options, selected, report, listed, rows = upload(services, GOOD)
    assert selected == "ward" and ids_of(services) == ["pirads", "ward"]
    assert "Loaded 'ward.csv'" in _text(msg) and "tick the 1 item(s)" in _text(msg)
    assert "This category list read from the data becomes public" in _text(listed)
    assert "Ward" in _text(listed) and "records): A (2), B (1)" in _text(listed)
    assert {o["value"] for o in options} == {"pirads", "ward"}
    flagged = {r["name"] for r in rows if r["flag"] == data_page.FLAG}
    assert flagged == {"Ward"}
    assert "awaiting confirmation" in _text(overview) and "Not confirmed" in _text(report)


@pytest.mark.parametrize("content, words", [
    (b"", "empty"),
    (b"Age,BPH\n", "no data rows"),
    (b"Age,Age\n1,2\n", "duplicate"),
    (b"Age,,BPH\n1,x,2\n", "no name"),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "PNG"),
    (b"PK\x03\x04" + b"\x00" * 100, "Excel"),
    (b"Age\n" + b"61\n" * 10_000, "upload limit"),
    (b"Age,BPH\n61,yes\n62,no,1,2\n", "line 3"),
])
def test_bad_uploads_give_a_message_and_change_nothing(services, content, words):
    before = services.registry.get("pirads")
    out = upload(services, content)
    assert "danger" in _text(out[0]) and words.lower() in _text(out[0]).lower()
    assert all(o is no_update for o in out[1:])
    assert ids_of(services) == ["pirads"] and services.registry.get("pirads") is before


@pytest.mark.parametrize("contents", [None, "", "garbage", "data:text/csv;base64,@@@",
                                      "data:text/csv,plain"])
def test_damaged_upload_payload(services, contents):
    out = data_callbacks.handle(services, ids.DATA_UPLOAD, contents, "x.csv", "pirads", None)
    assert "choose the file again" in _text(out[0]) and ids_of(services) == ["pirads"]


@pytest.mark.parametrize("content", [
    b"\xef\xbb\xbfAge,BPH\n61,Y\n62,N\n",                     # UTF-8 with BOM
    "Arzt;Alter\nMüller;61\nSchröder;70\n".encode("latin-1"),  # latin-1, semicolons
    b"Age\tBPH\n61\tTrue\n62\tFalse\n",                        # tab separated
    b"Age,BPH,Seen\nNA,1,2017-03-14\n61,0,14.03.2017\nn/a,,03/14/2017\n",
])
def test_messy_but_readable_uploads_load(services, content):
    out = upload(services, content, "messy.csv")
    assert "success" in _text(out[0]) and out[3] == "messy"


# --- editing and confirming ----------------------------------------------------------
def test_edit_bounds_then_confirm(services):
    *_, rows = upload(services, GOOD)
    for row in rows:
        if row["name"] == "Age":
            row["lower"], row["upper"] = "60", "65"
        if row["name"] == "Ward":
            row["categories"] = "A; B; C"  # a public ward list, not only those seen
    msg, _, _, selected, report, *_, rows = click(services, ids.DATA_SAVE, "ward", rows)
    assert "Saved" in _text(msg) and "not confirmed" in _text(msg)
    assert "2 value(s) outside the bounds" in _text(msg)
    assert all(r["flag"] != data_page.FLAG for r in rows)  # edited columns are owner-chosen
    assert not services.registry.get("ward").schema.confirmed
    assert services.registry.get("ward").frame["Age"].tolist() == [61.5, 65.0, 60.0]
    msg, overview, *_ = click(services, ids.DATA_CONFIRM, "ward", rows)
    assert "confirmed" in _text(msg) and services.registry.get("ward").schema.confirmed


def test_confirm_applies_unsaved_edits(services):
    *_, rows = upload(services, GOOD)
    rows = [dict(r, unit="years") if r["name"] == "Age" else r for r in rows]
    click(services, ids.DATA_CONFIRM, "ward", rows)  # Ward was read off the data: refused
    assert not services.registry.get("ward").schema.confirmed
    # Ward's categories were read off the data: confirmed by the owner's tick on their kind
    click(services, ids.DATA_CONFIRM, "ward", rows, tokens(services, "ward", decisions.LEVELS))
    ds = services.registry.get("ward")
    assert ds.schema.confirmed and ds.schema.column("Age").unit == "years"
    assert not ds.schema.flagged_columns()


@pytest.mark.parametrize("edit, words", [
    ({"lower": "sixty"}, "must be a number"),
    ({"lower": "90", "upper": "10"}, "below the upper"),
    ({"bin_width": "-1"}, "positive"),
    ({"kind": "spline"}, "unknown kind"),
    ({"upper": "inf"}, "finite"),
])
def test_invalid_table_edits_are_refused(services, edit, words):
    *_, rows = upload(services, GOOD)
    before = services.registry.get("ward")
    rows = [dict(r, **edit) if r["name"] == "Age" else r for r in rows]
    for button in (ids.DATA_SAVE, ids.DATA_CONFIRM):
        out = click(services, button, "ward", rows)
        assert words in _text(out[0]), _text(out[0])
        assert services.registry.get("ward").schema == before.schema


def test_forged_dataset_or_rows(services):
    out = click(services, ids.DATA_CONFIRM, "../../etc", [])
    assert "no dataset" in _text(out[0])
    rows = data_page.schema_rows(services.registry.get("pirads").schema)[:-1]
    out = click(services, ids.DATA_SAVE, "pirads", rows)
    assert "does not match" in _text(out[0])
    out = click(services, ids.DATA_SAVE, "pirads", "not a list")
    assert "not readable" in _text(out[0])
    assert services.registry.get("pirads").schema.confirmed


def test_selecting_a_dataset_shows_its_schema(services):
    upload(services, GOOD)
    _, _, _, selected, report, *_, rows = data_callbacks.handle(
        services, ids.DATA_LIST, None, None, "pirads", None)
    assert selected == "pirads" and len(rows) == 16 and "Confirmed" in _text(report)


# --- role checks ---------------------------------------------------------------------
@pytest.mark.parametrize("identity", [
    Identity("carl", Role.COLLABORATOR, True), Identity("tina", Role.THIRD_PARTY, True),
    Identity("olga", Role.OWNER, False),
])
def test_non_owner_requests_change_nothing(services, identity):
    *_, rows = upload(services, GOOD)
    services.identity.identity = identity
    for out in (upload(services, b"Age\n1\n2\n", "other.csv"),
                click(services, ids.DATA_CONFIRM, "ward", rows),
                click(services, ids.DATA_SAVE, "ward", rows)):
        assert "owner" in _text(out[0]) and all(o is no_update for o in out[1:])
    assert ids_of(services) == ["pirads", "ward"]
    assert not services.registry.get("ward").schema.confirmed


# --- over HTTP, as the browser calls it ----------------------------------------------
@pytest.fixture
def client(services):
    app = Dash(__name__, suppress_callback_exceptions=True)
    app.layout = html.Div(id=ids.PAGE)
    data_callbacks.register_callbacks(app, services)
    return app.server.test_client()


OUTPUTS = [f"{ids.DATA_MESSAGE}.children", f"{ids.DATA_OVERVIEW}.children",
           f"{ids.DATA_LIST}.options", f"{ids.DATA_LIST}.value",
           f"{ids.DATA_REPORT}.children", f"{ids.DATA_CHECKLIST}.children",
           f"{ids.DATA_TABLE}.data"]


def post(client, changed: str, contents=None, selected="pirads", rows=None, clicks=None,
         unit=(data_page.ROW_UNIT, 1, True), ticks: dict[str, list] | None = None):
    """One call as the browser makes it; ``ticks`` maps a checklist box's key to its value."""
    specs = [dict(zip(("id", "property"), o.split("."), strict=True)) for o in OUTPUTS]
    inputs = [
        {"id": ids.DATA_UPLOAD, "property": "contents", "value": contents},
        {"id": ids.DATA_LIST, "property": "value", "value": selected},
        {"id": ids.DATA_SAVE, "property": "n_clicks", "value": clicks},
        {"id": ids.DATA_CONFIRM, "property": "n_clicks", "value": clicks},
    ]
    state = [{"id": ids.DATA_UPLOAD, "property": "filename", "value": "web.csv"},
             {"id": ids.DATA_TABLE, "property": "data", "value": rows},
             {"id": ids.DATA_PATIENT, "property": "value", "value": unit[0]},
             {"id": ids.DATA_PATIENT_K, "property": "value", "value": unit[1]},
             {"id": ids.DATA_PATIENT_K_CONFIRM, "property": "value", "value": unit[2]},
             [{"id": {"type": ids.DATA_DECISION, "key": key}, "property": "value",
               "value": value} for key, value in (ticks or {}).items()]]
    body = {"output": ".." + "...".join(OUTPUTS) + "..", "outputs": specs, "inputs": inputs,
            "state": state, "changedPropIds": [changed]}
    return client.post("/_dash-update-component", json=body)


def test_http_upload_and_bad_upload(client, services):
    ok = post(client, f"{ids.DATA_UPLOAD}.contents", contents=data_url(GOOD))
    assert ok.status_code == 200 and "Loaded" in ok.get_data(as_text=True)
    bad = post(client, f"{ids.DATA_UPLOAD}.contents", contents=data_url(b"\x00\x01\x02" * 50))
    assert bad.status_code == 200 and "binary" in bad.get_data(as_text=True)
    assert ids_of(services) == ["pirads", "web"]


def test_http_confirm_with_the_ticks_the_browser_sends(client, services):
    upload(services, GOOD)
    rows = data_page.schema_rows(services.registry.get("ward").schema)
    refused = post(client, f"{ids.DATA_CONFIRM}.n_clicks", selected="ward", rows=rows, clicks=1,
                   ticks={"levels": ["levels:forged"], "bounds": [{"not": "a tick"}]})
    assert refused.status_code == 200 and "changed since you ticked" in refused.get_data(
        as_text=True)
    assert not services.registry.get("ward").schema.confirmed
    (token,), = tokens(services, "ward", decisions.LEVELS)
    ok = post(client, f"{ids.DATA_CONFIRM}.n_clicks", selected="ward", rows=rows, clicks=2,
              ticks={"levels": [token]})
    assert ok.status_code == 200 and "now public metadata" in ok.get_data(as_text=True)
    assert services.registry.get("ward").schema.confirmed


def test_http_non_owner_confirm_is_refused(client, services):
    upload(services, GOOD)
    rows = data_page.schema_rows(services.registry.get("ward").schema)
    services.identity.identity = Identity("carl", Role.COLLABORATOR, True)
    resp = post(client, f"{ids.DATA_CONFIRM}.n_clicks", selected="ward", rows=rows, clicks=1)
    assert resp.status_code == 200 and "owner" in resp.get_data(as_text=True)
    assert not services.registry.get("ward").schema.confirmed


# --- fuzz: messy files through the page ----------------------------------------------
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(content=messy_csv())
def test_messy_uploads_never_break_the_page(services, content):
    out = upload(services, content, "fuzz.csv")
    text = _text(out[0])
    assert ("success" in text) != ("danger" in text)
    assert ids_of(services)[0] == "pirads"
