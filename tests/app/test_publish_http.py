"""Published views over HTTP (issue 16): the owner publishes through the page's callbacks, the
audience opens ``/views/<slug>`` and its exports; opening spends nothing and is logged once per
figure; outsiders get the unknown-page answer; only served DP values ever leave the server."""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta

import numpy as np
import pytest

from layouts import ids
from layouts.components.figures import fmt
from services.data.sources.resolve import aggregates
from services.identity.roles import Role
from services.views.inputs import with_bound
from services.views.queries import ViewRequest
from tests.app.conftest import SessionAs
from tests.app.dash_http import callback_payload

UPDATE = "/_dash-update-component"
N_FIGURES = 3


def _post(client, output_id: str, values: dict, changed: tuple[str, str]):
    deps = client.get("/_dash-dependencies").json
    body = callback_payload(deps, output_id, values, changed)
    for s in body["state"]:       # pattern-matching states (captions, positions) as lists
        if str(s["id"]).startswith("{"):
            s["value"] = []
    return client.post(UPDATE, json=body)


def _open(client, path: str) -> dict:
    resp = _post(client, ids.PAGE_CONTENT, {(ids.PAGE_LOCATION, "pathname"): path},
                 (ids.PAGE_LOCATION, "pathname"))
    assert resp.status_code == 200
    return resp.json["response"][ids.PAGE_CONTENT]["children"]


def _publish(client, services, audience: str = "third_party", user: str | None = None) -> str:
    """Publish three figures through the Publish page's callbacks (quote, then confirm)."""
    owner = services.identity.current()
    cands = services.publish.candidates(owner, "pirads")[:N_FIGURES]
    form = {(ids.PUB_DATASET, "value"): "pirads", (ids.PUB_TITLE, "value"): "Partner review",
            (ids.PUB_AUDIENCE, "value"): audience, (ids.PUB_USER, "value"): user,
            (ids.PUB_EXPIRES, "value"): (services.ledger_clock() + timedelta(days=7))
            .date().isoformat(),
            (ids.PUB_FIGURES, "value"): [c.key for c in cands]}
    quoted = _post(client, ids.PUB_QUOTE_OUT, form, (ids.PUB_QUOTE, "n_clicks"))
    assert quoted.status_code == 200
    store = quoted.json["response"][ids.PUB_QUOTED]["data"]
    assert store["total"] >= 0
    assert "Publishing charges" in json.dumps(quoted.json)
    done = _post(client, ids.PUB_MESSAGE, {**form, (ids.PUB_QUOTED, "data"): store,
                                           (ids.PUB_CONFIRM, "n_clicks"): 1},
                 (ids.PUB_CONFIRM, "n_clicks"))
    slug = re.search(r"/views/([a-z0-9-]+)", json.dumps(done.json["response"]))
    assert slug, done.json
    return slug.group(1)


@pytest.fixture
def publish_app(tmp_path):
    """The app with the default budgets (a third party can afford the paper's figures)."""
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path}, seed=20261126)
    services_of(app).identity = SessionAs(Role.OWNER)
    return app


@pytest.fixture
def client(publish_app):
    return publish_app.server.test_client()


@pytest.fixture
def session(publish_app) -> SessionAs:
    from app import services_of

    return services_of(publish_app).identity


@pytest.fixture
def services(publish_app):
    from app import services_of
    from services.ledger import db as ledger_db

    s = services_of(publish_app)
    s.ledger_clock = ledger_db.now   # type: ignore[attr-defined]
    return s


def _spend(services) -> list:
    led = services.ledger
    return [(b.role, b.spent) for b in led.budgets()] + [
        (d.dataset_id, d.loss) for d in led.dataset_statuses()] + [len(led.releases())]


def test_publishing_charges_the_audience_role_the_quoted_cost(client, services, session):
    before = services.ledger.budget(role=Role.THIRD_PARTY, dataset_id="pirads").spent
    assert before == 0                   # nothing released at the third-party tier yet
    slug = _publish(client, services)
    page = services.publish.store.get(slug)
    rels = {r.id: r for r in services.ledger.releases()}
    assert [rels[f.release_id].role for f in page.figures] == ["third_party"] * N_FIGURES
    charged = math.fsum(rels[f.release_id].epsilon for f in page.figures)
    after = services.ledger.budget(role=Role.THIRD_PARTY, dataset_id="pirads").spent
    assert after - before == pytest.approx(charged)
    session.set(Role.THIRD_PARTY, "tina")
    refused = _post(client, ids.PUB_QUOTE_OUT, {(ids.PUB_DATASET, "value"): "pirads"},
                    (ids.PUB_QUOTE, "n_clicks"))
    assert "Only the data owner" in json.dumps(refused.json)


def test_opening_spends_nothing_and_logs_one_delivery_per_figure(client, services, session):
    slug = _publish(client, services)
    page = services.publish.store.get(slug)
    spend = _spend(services)
    session.set(Role.THIRD_PARTY, "tina")
    for opening in (1, 2):
        before = len(services.ledger.deliveries())
        body = json.dumps(_open(client, f"/views/{slug}"))
        assert "Partner review" in body and "Total privacy cost" in body
        new = services.ledger.deliveries()[before:]
        assert [(u, r, i) for _, u, r, i in new] == [
            ("tina", "third_party", f.release_id) for f in page.figures], opening
        assert _spend(services) == spend          # budgets, dataset loss, releases unchanged
    _open(client, f"/views/{slug}/demo")
    assert len(services.ledger.deliveries()) - before == 2 * N_FIGURES
    assert _spend(services) == spend


def test_outsiders_get_the_unknown_page_answer_and_expired_pages_are_refused(
        client, services, session, monkeypatch):
    monkeypatch.setattr(services.publish, "user_role",
                        lambda name: Role.THIRD_PARTY if name == "tina" else None)
    role_page = _publish(client, services)
    user_page = _publish(client, services, audience="user", user="tina")
    session.set(Role.THIRD_PARTY, "tina")
    unknown = _open(client, "/views/no-such-page-1234")
    unknown_export = client.get("/views/no-such-page-1234/export.html")
    assert unknown_export.status_code == 404
    outsiders = [(Role.COLLABORATOR, "carl", role_page), (Role.THIRD_PARTY, "tom", user_page),
                 (Role.COLLABORATOR, "tina", user_page)]
    before = len(services.ledger.deliveries())
    for role, user, slug in outsiders:
        session.set(role, user)
        assert _open(client, f"/views/{slug}") == unknown
        assert _open(client, f"/views/{slug}/demo") == unknown
        for suffix in ("export.html", "reports.json"):
            resp = client.get(f"/views/{slug}/{suffix}")
            assert (resp.status_code, resp.data) == (404, unknown_export.data)
    assert len(services.ledger.deliveries()) == before     # nothing handed out

    session.set(Role.THIRD_PARTY, "tina")
    assert "Partner review" in json.dumps(_open(client, f"/views/{user_page}"))
    from services.ledger import db as ledger_db

    later = ledger_db.now() + timedelta(days=30)
    monkeypatch.setattr(ledger_db, "now", lambda: later)
    before = len(services.ledger.deliveries())
    expired = json.dumps(_open(client, f"/views/{role_page}"))
    assert "expired" in expired and "Total privacy cost" not in expired
    assert client.get(f"/views/{role_page}/export.html").status_code == 410
    assert len(services.ledger.deliveries()) == before
    session.set(Role.OWNER)
    services.publish.withdraw(session.current(), user_page)
    session.set(Role.THIRD_PARTY, "tina")
    assert "withdrawn" in json.dumps(_open(client, f"/views/{user_page}"))


# ---- no value that was not in a served DP release -------------------------------------------

FIG_KEYS = ("x", "y", "q1", "median", "q3", "lowerfence", "upperfence")


def _numbers(node, out: list[float]) -> None:
    if isinstance(node, bool):
        return
    if isinstance(node, int | float):
        out.append(float(node))
    elif isinstance(node, list):
        for v in node:
            _numbers(v, out)


def _figure_numbers(figures: list[dict]) -> list[float]:
    out: list[float] = []
    for fig in figures:
        for trace in fig["data"]:
            for key in FIG_KEYS:
                _numbers(trace.get(key), out)
    return out


def _graphs(node, out: list[dict]) -> list[dict]:
    if isinstance(node, dict):
        if node.get("type") == "Graph":
            out.append(node["props"]["figure"])
        for v in node.values():
            _graphs(v, out)
    elif isinstance(node, list):
        for v in node:
            _graphs(v, out)
    return out


def _cells(node, out: list[str]) -> list[str]:
    """Text of every table data cell (``Td``) in a Dash component tree."""
    if isinstance(node, dict):
        if node.get("type") == "Td" and isinstance(node["props"].get("children"), str):
            out.append(node["props"]["children"])
        for v in node.values():
            _cells(v, out)
    elif isinstance(node, list):
        for v in node:
            _cells(v, out)
    return out


NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")


def test_page_and_export_hold_only_served_dp_values(client, services, session):
    slug = _publish(client, services)
    page = services.publish.store.get(slug)
    rels = {r.id: r for r in services.ledger.releases()}
    served: set[float] = set()
    shown_text: set[str] = set()
    truths = []
    ds = services.registry.get("pirads")
    for f in page.figures:
        a = rels[f.release_id].answer
        grid = [v for key in ("values", "ci_low", "ci_high") for row in a[key] for v in row
                if v is not None]
        served |= {round(v, 9) for v in grid}
        shown_text |= {fmt(v) for v in grid}
        shown_text |= {fmt(e) for e in a["group_epsilon"] if e is not None}  # ε row
        req = ViewRequest("pirads", f.request["view"], f.request["x"], f.request["group"],
                          "sound", Role.THIRD_PARTY)
        plan = services.releases.plan(session.current(), req, dataset=ds)
        truth = plan.truth(aggregates(ds, with_bound(plan.query(), ds.schema)))
        values = np.array([[np.nan if v is None else v for v in row] for row in a["values"]])
        ok = np.isfinite(truth) & np.isfinite(values)
        if ok.any():   # a figure whose groups are all withheld shows no value at all
            assert not np.allclose(truth[ok], values[ok]), "a DP release equal to the truth"
        truths.append(truth[np.isfinite(truth)])
    hidden = {round(float(t), 9) for t in np.concatenate(truths)} - served
    assert hidden, "some true statistic must differ from every served value"

    session.set(Role.THIRD_PARTY, "tina")
    tree = _open(client, f"/views/{slug}")
    export = client.get(f"/views/{slug}/export.html")
    assert export.status_code == 200 and "attachment" in export.headers["Content-Disposition"]
    html_text = export.get_data(as_text=True)
    embedded = json.loads(re.search(r"var figures = (\[.*?\]);\n", html_text).group(1))
    for figures in (_graphs(tree, []), embedded):
        assert len(figures) == N_FIGURES
        nums = {round(v, 9) for v in _figure_numbers(figures)}
        assert nums and nums <= served, nums - served
        assert not nums & hidden
    cells = _cells(tree, []) + re.findall(r"<td>(.*?)</td>", html_text)
    assert cells
    for cell in cells:
        if cell == "withheld":
            continue
        found = set(NUMBER.findall(cell.split(" (")[0] + " " + cell.split("interval")[-1]))
        assert found and found <= shown_text, (cell, found - shown_text)
    ours = html_text.split("<script>")[0] + html_text.split("</script>")[-2]  # not plotly.js
    precise = [repr(t) for t in hidden if len(repr(t)) >= 8]   # e.g. a true mean
    assert precise
    for text in precise:               # no true statistic at full precision anywhere
        assert text not in ours and text not in json.dumps(tree)
    for word in ("realized_noise", "cdn.", "http:", "https:", "src="):
        assert word not in ours, word
    assert "<script src" not in html_text and "<link" not in html_text
    reports = client.get(f"/views/{slug}/reports.json").json
    assert [r["release_id"] for r in reports["figures"]] == [f.release_id for f in page.figures]
    assert reports["page"]["total_epsilon"] == pytest.approx(
        math.fsum(rels[f.release_id].epsilon for f in page.figures))
