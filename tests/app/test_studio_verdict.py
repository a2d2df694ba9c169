"""Studio honesty (issue 23 item 4): an auto-tune whose tries all missed a tolerance is a
failure (red, a one-line verdict naming the tolerance, its value and the column behind it),
its files are held back until the owner ticks "download anyway", which is recorded on the run
and in the ledger; a passing auto-tune is green with its verdict and its files."""

from __future__ import annotations

import json

import pytest

from layouts import ids
from tests.app.test_studio_http import _done, _post, _run

FAILING = {(ids.ST_TOL_KS, "value"): 0, (ids.ST_TUNE_BUDGET, "value"): 10}
PASSING = {(ids.ST_TOL_ERROR, "value"): 1e6, (ids.ST_TOL_KS, "value"): 1,
           (ids.ST_TOL_CORR, "value"): 2, (ids.ST_TUNE_BUDGET, "value"): 10}


@pytest.fixture
def services(explore_app):
    from app import services_of

    return services_of(explore_app)


def _download(client, token: str, button: str = ids.ST_DL_CSV) -> dict:
    return _post(client, ids.ST_DOWNLOAD, {(ids.ST_LAST, "data"): token,
                                           (button, "n_clicks"): 1},
                 (button, "n_clicks")).json["response"]


def _insist(client, token: str, value: list[str]) -> dict:
    return _post(client, ids.ST_DL_CSV, {(ids.ST_LAST, "data"): token,
                                         (ids.ST_INSIST, "value"): value},
                 (ids.ST_INSIST, "value")).json["response"]


def test_a_failed_auto_tune_is_red_and_keeps_its_files_until_the_owner_insists(
        client, services):
    resp = _run(client, tune=True, extra=FAILING)
    token = resp.json["response"][ids.ST_LAST]["data"]
    out = _done(client, resp)
    result = services.studio.job(services.identity.current(), token)["result"]
    said = result["verdict"]
    assert said["ok"] is False
    # the verdict names the tolerance, its value on the shown try, and the column behind it
    last = result["trail"]["tries"][-1]
    ks = next(c for c in last["checks"] if c["name"] == "KS distance")
    assert not ks["met"] and ks["value"] == pytest.approx(last["ks"]) and ks["label"]
    assert said["text"].startswith("Auto-tune failed: none of 2 tries")
    assert f"KS distance {ks['value']:.3g} (tolerance ≤ 0)" in said["text"]
    assert f": {ks['label']}, sd " in said["text"] and "→" in said["text"]
    shown = json.dumps(out[ids.ST_RESULTS])
    assert "alert-danger" in shown or '"color": "danger"' in shown
    assert "Auto-tune failed" in shown and '"color": "success"' not in shown
    assert all(out[b]["disabled"] is True for b in (ids.ST_DL_CSV, ids.ST_DL_JSON,
                                                     ids.ST_DL_HTML))
    assert out[ids.ST_INSIST_BOX]["hidden"] is False

    # the server holds the files back whatever the browser's buttons say
    held = _download(client, token)
    assert ids.ST_DOWNLOAD not in held and "held back" in json.dumps(held)
    deliveries = len(services.ledger.deliveries())

    # the owner insists: recorded on the run and in the ledger, then the files come
    took = _insist(client, token, ["insist"])
    assert all(took[b]["disabled"] is False for b in (ids.ST_DL_CSV, ids.ST_DL_JSON,
                                                      ids.ST_DL_HTML))
    assert "Recorded" in json.dumps(took[ids.ST_MESSAGE])
    logged = services.ledger.deliveries()
    assert len(logged) == deliveries + 1
    assert logged[-1][1] == "test-owner" and logged[-1][3] == result["release_id"]
    csv = _download(client, token)[ids.ST_DOWNLOAD]["data"]
    assert csv["filename"].endswith(".csv")
    rep = json.loads(_download(client, token, ids.ST_DL_JSON)[ids.ST_DOWNLOAD]["data"]
                     ["content"])
    assert rep["verdict"]["ok"] is False and rep["downloaded_anyway"]["user"] == "test-owner"
    page = _download(client, token, ids.ST_DL_HTML)[ids.ST_DOWNLOAD]["data"]["content"]
    assert "Verdict (FAILED):" in page and "Downloaded anyway</strong> by test-owner" in page
    # ticking again records nothing more; unticking turns the buttons off again
    _insist(client, token, ["insist"])
    assert len(services.ledger.deliveries()) == deliveries + 1
    off = _insist(client, token, [])
    assert off[ids.ST_DL_CSV]["disabled"] is True


def test_a_passing_auto_tune_is_green_with_its_verdict_and_files(client, services):
    resp = _run(client, tune=True, extra=PASSING)
    token = resp.json["response"][ids.ST_LAST]["data"]
    out = _done(client, resp)
    said = services.studio.job(services.identity.current(), token)["result"]["verdict"]
    assert said["ok"] is True and said["text"].startswith("Auto-tune passed: try 1 of 1")
    assert "KS distance" in said["text"] and "tolerance ≤ 1)" in said["text"]
    shown = json.dumps(out[ids.ST_RESULTS])
    assert "Auto-tune passed" in shown and '"color": "success"' in shown
    assert out[ids.ST_DL_CSV]["disabled"] is False and out[ids.ST_INSIST_BOX]["hidden"] is True
    assert ids.ST_DOWNLOAD in _download(client, token)


def test_an_auto_tune_that_cannot_afford_a_try_fails_with_nothing_charged(client, services):
    resp = _run(client, tune=True, extra={**FAILING, (ids.ST_TUNE_BUDGET, "value"): 1})
    out = _done(client, resp)
    shown = json.dumps(out[ids.ST_RESULTS])
    assert "Auto-tune failed: nothing was run or charged" in shown and "danger" in shown
    assert out[ids.ST_DL_CSV]["disabled"] is True and out[ids.ST_INSIST_BOX]["hidden"] is True
    assert services.ledger.count_releases() == 0
