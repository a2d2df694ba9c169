"""Nothing leaves the machine through a graph, and no CSV the app writes can run a formula.

Every CSV the app produces: the ledger export, the Explore figure CSV, the anonymized table.
Every graph: the config of each dcc.Graph in the page layouts and in the Explore answers.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from callbacks import anonymize as anonymize_cb
from callbacks import ledger as ledger_cb
from callbacks.explore import export
from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from layouts import ids
from layouts.components.graph_config import GRAPH_CONFIG, OFF_MACHINE_BUTTONS
from services.csv_safe import cell, frame_csv, is_safe, rows_csv
from services.identity.roles import Role
from tests.app.conftest import SessionAs
from tests.app.explore_client import preview, render
from tests.stand_ins import stand_in

ROOT = Path(__file__).resolve().parents[2]
NASTY = ["=HYPERLINK(\"http://x\",\"y\")", "+SUM(A1)", "-2+3+cmd|' /C calc'!A0", "@SUM(1)",
         "\t=1", "\r=1"]


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


def _assert_safe(text: str) -> None:
    bad = [c for c in _cells(text) if not is_safe(c)]
    assert not bad, bad


# ---- the helper --------------------------------------------------------------------------

@pytest.mark.parametrize("value", NASTY)
def test_the_helper_escapes_every_formula_start(value):
    assert cell(value) == "'" + value
    _assert_safe(rows_csv(["a"], [[value]]))


@pytest.mark.parametrize("value", [-1.5, -3, 0.0, 2e-3, "-1.25", "12", "plain"])
def test_numbers_and_plain_text_are_kept(value):
    assert cell(value) == (repr(float(value)) if isinstance(value, float) else str(value))


def test_a_frame_keeps_numbers_and_escapes_text():
    frame = pd.DataFrame({"x": [-1.5, np.nan], "w": NASTY[:2]})
    text = frame_csv(frame)
    _assert_safe(text)
    back = pd.read_csv(io.StringIO(text))
    assert back["x"].iloc[0] == -1.5 and back["w"].iloc[0] == "'" + NASTY[0]


# ---- every CSV the app produces ----------------------------------------------------------

@pytest.fixture
def nasty_app(tmp_path):
    """An app whose only upload has formula-like categories, a user and a dataset id."""
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path}, seed=7)
    services = services_of(app)
    services.identity = SessionAs(Role.OWNER, user="=cmd|' /C calc'!A0")
    content = rows_csv(["Age", "Ward"], ([40 + i % 40, NASTY[i % 4]] for i in range(200)))
    content = content.replace("'", "")            # the raw upload itself is not escaped
    ds = services.registry.add_upload("-evil.csv", content.encode())
    assert ds.schema.column("Ward").categories, ds.schema.column("Ward")
    return app, services, ds


def test_explore_and_ledger_csvs_escape_formula_cells(nasty_app):
    app, services, ds = nasty_app
    client = app.server.test_client()
    released = []
    for view, x, group in (("histogram", "Ward", "none"), ("mean", "Age", "Ward")):
        reply = render(client, dataset=ds.id, view=view, x=x, group=group)
        assert reply.figures(), reply.message
        released += reply.release_ids()
    texts = [export(services, "csv", rid)["content"] for rid in released]
    texts.append(ledger_cb.export(services, None, None)["content"])
    for text in texts:
        _assert_safe(text)
    joined = "\n".join(texts)
    assert "'=HYPERLINK" in joined and "'@SUM(1)" in joined and "'+SUM(A1)" in joined
    assert "'=cmd|" in texts[-1]                       # the user name in the ledger CSV


def test_the_anonymized_csv_escapes_formula_cells():
    frame = pd.DataFrame({"age": [30.0, 31, 45, 46, 47, 60] * 3,
                          "ward": (NASTY[:3] * 6)[:18], "dx": (NASTY[3:5] * 9)[:18]})
    schema = Schema("tiny", (
        ColumnSpec("age", ColumnKind.NUMERIC, ColumnRole.QUASI_IDENTIFIER),
        ColumnSpec("ward", ColumnKind.CATEGORICAL, ColumnRole.QUASI_IDENTIFIER),
        ColumnSpec("dx", ColumnKind.CATEGORICAL, ColumnRole.SENSITIVE)))
    ds = SimpleNamespace(id="tiny", title="Tiny", version="1", frame=frame, schema=schema)
    registry = SimpleNamespace(list=lambda: [ds], get=lambda _id: ds)
    services = stand_in(registry=registry, identity=SessionAs(Role.OWNER))
    msg, _report, _fig, store, _disabled = anonymize_cb.handle_run(
        services, ids.AN_RUN, "tiny", ["age", "ward"], ["dx"], 3, "hybrid", "shuffle",
        "age", "ward", None, rng=np.random.default_rng(1))
    assert store and store.get("csv"), msg
    _assert_safe(store["csv"])
    assert "'" in store["csv"]


# ---- graphs ------------------------------------------------------------------------------

def test_the_shared_config_sends_nothing_off_the_machine():
    assert GRAPH_CONFIG["showSendToCloud"] is False
    assert GRAPH_CONFIG["showEditInChartStudio"] is False
    assert GRAPH_CONFIG["showLink"] is False and GRAPH_CONFIG["sendData"] is False
    assert GRAPH_CONFIG["plotlyServerURL"] == ""
    assert set(OFF_MACHINE_BUTTONS) <= set(GRAPH_CONFIG["modeBarButtonsToRemove"])
    assert "toImage" not in GRAPH_CONFIG["modeBarButtonsToRemove"]     # PNG stays
    assert "modeBarButtons" not in GRAPH_CONFIG and "modeBarButtonsToAdd" not in GRAPH_CONFIG


def _graph_configs(node) -> list[dict]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "Graph":
            found.append(node.get("props", {}).get("config"))
        for v in node.values():
            found += _graph_configs(v)
    elif isinstance(node, list):
        for v in node:
            found += _graph_configs(v)
    return found


def _safe_config(config) -> bool:
    return config == GRAPH_CONFIG or (isinstance(config, dict) and config.get("staticPlot"))


PASSED_IN = {"layouts/publish/view.py"}
"""Layouts whose graphs take their config from the caller (callbacks/publish.py)."""


def test_every_graph_in_the_source_uses_the_shared_config():
    sources = [p for d in ("layouts", "callbacks") for p in (ROOT / d).rglob("*.py")]
    calls = 0
    for path in sources:
        text = path.read_text()
        for match in re.finditer(r"dcc\.Graph\(", text):
            call = text[match.start(): text.find("\n\n", match.start())]
            calls += 1
            assert ("config=GRAPH_CONFIG" in call or '"staticPlot": True' in call
                    or (path.relative_to(ROOT).as_posix() in PASSED_IN and "config" in call)), path
    assert calls >= 3
    publish = (ROOT / "callbacks" / "publish.py").read_text()
    assert "from layouts.components.graph_config import GRAPH_CONFIG" in publish
    for builder in ("demo_deck", "view_page", "page_html"):
        assert re.search(rf"{builder}\(opened, GRAPH_CONFIG\)", publish), builder


def test_every_graph_the_app_sends_uses_the_shared_config(explore_app, client, session):
    import json

    from app import services_of
    from layouts.anonymize import page as anonymize
    from layouts.components import shell
    from layouts.explore import page as explore_page

    services = services_of(explore_app)
    owner = session.current()
    trees = [shell.layout(), anonymize.layout(services.registry, owner),
             explore_page.layout(services.registry.list(), owner)]
    replies = [preview(client, compare=True), render(client), render(client, compare=True)]
    configs = [c for t in trees for c in _graph_configs(json.loads(
        json.dumps(t, default=lambda o: o.to_plotly_json())))]
    for reply in replies:
        configs += _graph_configs(reply.prop(ids.EX_GRAPHS))
    assert len(configs) >= 8
    assert all(_safe_config(c) for c in configs), configs
