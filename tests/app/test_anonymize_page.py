"""Anonymize page: owner-only layout and callbacks, report, figure and CSV release."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from dash import Dash, no_update
from plotly.utils import PlotlyJSONEncoder

from callbacks import anonymize as cb
from callbacks.shell import page_for
from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from layouts import ids
from layouts.anonymize import page
from services.data.registry import DatasetRegistry
from services.identity.roles import Role
from services.identity.session import Identity
from tests.stand_ins import stand_in

OWNER = Identity("olga", Role.OWNER, True)


class Session:
    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    def current(self) -> Identity:
        return self.identity


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return DatasetRegistry(tmp_path_factory.mktemp("store"))


@pytest.fixture
def services(registry):
    return stand_in(registry=registry, identity=Session(OWNER))


class TinyRegistry:
    """A fake registry holding one small dataset (the page must not need more)."""

    def __init__(self) -> None:
        frame = pd.DataFrame(
            {
                "age": [30.0, 31, 45, 46, 47, 60],
                "ward": list("AABBBC"),
                "dx": ["x", "y", "x", "z", "z", "y"],
            }
        )
        schema = Schema(
            "tiny",
            (
                ColumnSpec("age", ColumnKind.NUMERIC, ColumnRole.QUASI_IDENTIFIER),
                ColumnSpec("ward", ColumnKind.CATEGORICAL, ColumnRole.QUASI_IDENTIFIER),
                ColumnSpec("dx", ColumnKind.CATEGORICAL, ColumnRole.SENSITIVE),
            ),
        )
        self.ds = SimpleNamespace(id="tiny", title="Tiny", version="1", frame=frame, schema=schema)

    def list(self):
        return [self.ds]

    def get(self, dataset_id):
        if dataset_id != "tiny":
            from dp_engine.errors import DPError

            raise DPError(f"There is no dataset '{dataset_id}'.")
        return self.ds


def text(component) -> str:
    return json.dumps(component, cls=PlotlyJSONEncoder)


def run(services, **over):
    ds = services.registry.list()[0]
    args = {
        "dataset_id": ds.id,
        "qis": page.default_columns(ds.schema, ColumnRole.QUASI_IDENTIFIER),
        "sensitive": page.default_columns(ds.schema, ColumnRole.SENSITIVE),
        "k": 5,
        "method": "hybrid",
        "mode": "flatten",
        "x": "Age",
        "y": "Year",
        "store": None,
    }
    args.update(over)
    return cb.handle_run(
        services,
        ids.AN_RUN,
        args["dataset_id"],
        args["qis"],
        args["sensitive"],
        args["k"],
        args["method"],
        args["mode"],
        args["x"],
        args["y"],
        args["store"],
        rng=np.random.default_rng(7),
    )


def test_owner_layout_has_controls_and_label(services):
    out = text(page.layout(services.registry, OWNER))
    for needle in (
        ids.AN_DATASET,
        ids.AN_QIS,
        ids.AN_SENSITIVE,
        ids.AN_K,
        ids.AN_METHOD,
        ids.AN_SENSITIVE_MODE,
        ids.AN_RUN,
        ids.AN_SCATTER,
        ids.AN_DOWNLOAD_BTN,
        "not differential privacy",
    ):
        assert needle in out, needle
    assert "Anonym_ID" not in out and "ProcedureValidatingPhysicianName" not in out


@pytest.mark.parametrize(
    "identity",
    [
        Identity("carl", Role.COLLABORATOR, True),
        Identity("tina", Role.THIRD_PARTY, True),
        Identity("anonymous", Role.OWNER, False),
    ],
)
def test_non_owners_get_a_refusal_and_no_data(services, identity):
    out = text(page_for(services, identity, "/anonymize"))
    assert "owner" in out and ids.AN_RUN not in out
    services.identity = Session(identity)
    msg, report, fig, store, disabled = run(services)
    assert "owner" in text(msg) and report is None and store is None and disabled is True
    assert fig["data"] == []
    assert cb.handle_download(services, {"csv": "a,b\n1,2\n"}) is no_update
    assert cb.handle_dataset(services, "pirads") == ([], [], [], [])
    assert cb.handle_axes(services, "pirads", ["Age"], None, None) == ([], None, [], None)


def test_owner_run_gives_report_figure_and_k_anonymous_csv(services):
    msg, report, fig, store, disabled = run(services)
    assert disabled is False and "success" in text(msg)
    rep = text(report)
    assert "k achieved" in rep and "not differential privacy" in rep and "SSE/SST" in rep
    assert [t["type"] for t in fig["data"]] == ["scattergl", "scattergl"]
    assert len(fig["data"][0]["x"]) == 920
    released = pd.read_csv(io.StringIO(store["csv"]))
    ds = services.registry.get("pirads")
    qis = page.default_columns(ds.schema, ColumnRole.QUASI_IDENTIFIER)
    sens = page.default_columns(ds.schema, ColumnRole.SENSITIVE)
    assert list(released.columns) == [c for c in ds.frame.columns if c in qis + sens]
    assert len(released) == 920
    assert released.groupby(qis, dropna=False).size().min() >= 5
    sent = cb.handle_download(services, store)
    assert sent["content"] == store["csv"] and sent["filename"].endswith(".csv")


def test_release_rows_are_shuffled(services):
    store = run(services)[3]
    released = pd.read_csv(io.StringIO(store["csv"]))
    ages = pd.Series(store["plot"]["after"]["Age"], dtype=float)
    np.testing.assert_allclose(np.sort(released["Age"]), np.sort(ages))  # NaN sort last
    assert not np.array_equal(released["Age"].to_numpy(), ages.to_numpy())


def test_axis_change_replots_from_the_store_without_recomputing(services):
    store = run(services)[3]
    out = cb.handle_run(
        services, ids.AN_SCATTER_X, None, None, None, None, None, None, "Year", "Age", store
    )
    assert out[0] is no_update and out[3] is no_update
    assert out[2]["data"][0]["x"] == store["plot"]["before"]["Year"]


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"k": "five"}, "whole number"),
        ({"k": 1}, "whole number"),
        ({"k": 2.5}, "whole number"),
        ({"qis": []}, "at least one quasi-identifier"),
        ({"qis": ["Anonym_ID"]}, "cannot be"),
        ({"method": "magic"}, "Unknown method"),
        ({"dataset_id": "nope"}, "no dataset"),
        ({"qis": "Age"}, "not readable"),
    ],
)
def test_bad_input_gets_a_message(services, over, words):
    msg, *rest = run(services, **over)
    assert words in text(msg) and "danger" in text(msg)
    assert all(r is no_update for r in rest)


def test_fake_registry_and_k_larger_than_n():
    services = stand_in(registry=TinyRegistry(), identity=Session(OWNER))
    msg, *_ = run(services, k=10, x="age", y="ward")
    assert "larger than the number of records" in text(msg)
    msg, report, fig, store, _ = run(services, k=2, x="age", y="ward", mode="shuffle")
    released = pd.read_csv(io.StringIO(store["csv"]))
    assert released.groupby(["age", "ward"]).size().min() >= 2
    assert cb.handle_axes(services, "tiny", ["ward", "age"], None, None)[1] == "age"
    assert cb.handle_dataset(services, "tiny")[1] == ["age", "ward"]


def test_callbacks_register_on_the_given_app(services):
    app = Dash(__name__)
    cb.register_callbacks(app, services)
    outputs = " ".join(app.callback_map)
    for needle in (ids.AN_REPORT, ids.AN_SCATTER, ids.AN_DOWNLOAD, ids.AN_QIS, ids.AN_SCATTER_X):
        assert needle in outputs


RUN_OUTPUTS = [
    (ids.AN_MESSAGE, "children"),
    (ids.AN_REPORT, "children"),
    (ids.AN_SCATTER, "figure"),
    (ids.AN_STORE, "data"),
    (ids.AN_DOWNLOAD_BTN, "disabled"),
]


def post_run(client, **state):
    """POST the run callback over HTTP, exactly as a browser (or a forger) would."""
    values = {
        ids.AN_DATASET: "pirads",
        ids.AN_QIS: ["Age", "Year"],
        ids.AN_SENSITIVE: ["Gleason score"],
        ids.AN_K: 5,
        ids.AN_METHOD: "hybrid",
        ids.AN_SENSITIVE_MODE: "flatten",
        ids.AN_STORE: None,
    }
    values.update(state)
    payload = {
        "output": ".." + "...".join(f"{i}.{p}" for i, p in RUN_OUTPUTS) + "..",
        "outputs": [{"id": i, "property": p} for i, p in RUN_OUTPUTS],
        "inputs": [
            {"id": ids.AN_RUN, "property": "n_clicks", "value": 1},
            {"id": ids.AN_SCATTER_X, "property": "value", "value": "Age"},
            {"id": ids.AN_SCATTER_Y, "property": "value", "value": "Year"},
        ],
        "changedPropIds": [f"{ids.AN_RUN}.n_clicks"],
        "state": [
            {"id": i, "property": "data" if i == ids.AN_STORE else "value", "value": v}
            for i, v in values.items()
        ],
    }
    resp = client.post("/_dash-update-component", json=payload)
    return resp.status_code, resp.get_json()


@pytest.mark.parametrize("role", [Role.COLLABORATOR, Role.THIRD_PARTY])
def test_forged_http_request_from_non_owner_is_refused(client, session, role):
    session.set(role)
    status, body = post_run(client)
    assert status == 200
    reply = json.dumps(body)
    assert "owner" in reply and body["response"][ids.AN_STORE]["data"] is None
    assert "csv" not in reply and "70.4" not in reply  # no record leaves the server


def test_owner_http_run_returns_a_release(client, session):
    session.set(Role.OWNER)
    status, body = post_run(client)
    assert status == 200
    store = body["response"][ids.AN_STORE]["data"]
    released = pd.read_csv(io.StringIO(store["csv"]))
    assert released.groupby(["Age", "Year"], dropna=False).size().min() >= 5


def test_forged_store_on_axis_change_gets_a_message_not_a_crash(services):
    def replot(store):
        return cb.handle_run(
            services, ids.AN_SCATTER_X, None, None, None, None, None, None, "Age", "Year", store
        )

    assert replot({"plot": {"before": "junk"}})[2]["data"] == []
    out = replot({"plot": {"before": {"Age": 1, "Year": 2}, "after": 5, "groups": []}})
    assert "danger" in text(out[0]) and out[2] is no_update


def test_scatter_uses_whole_number_ticks_for_scores_and_a_safe_palette():
    from layouts.anonymize.figures import OKABE_ITO, before_after_scatter

    fig = before_after_scatter(
        "Age",
        "Year",
        [40.5, 61.0],
        [2017, 2018],
        [50.0, 50.0],
        [2017, 2018],
        [0, 9],
        method="hybrid",
        k=2,
    )
    assert fig["layout"]["yaxis"]["tickformat"] == "d"
    assert "tickformat" not in fig["layout"]["xaxis"]
    assert fig["data"][0]["marker"]["color"] == [OKABE_ITO[0], OKABE_ITO[1]]
    assert "not differential privacy" in fig["layout"]["title"]["text"]
