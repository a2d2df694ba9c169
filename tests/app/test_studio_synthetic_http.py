"""The synthetic copy on the Release page over HTTP (issue 15): a third party asks for one, the
job is polled until done (bounded polls), it is charged once and exactly OpenDP's ε, and
nothing it receives (page, CSV, report) holds an original-data value; a non-owner cannot get
the metrics against the original or a per-record copy, even with forged owner options; bad
input charges nothing; a run made through one app instance is downloaded through another
built on the same data dir (what several gunicorn workers do)."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from dp_engine.release.synthetic import plan_mst, synth_domain
from layouts import ids
from services.identity.roles import Role
from services.studio.accounting import opendp_epsilon
from tests.app.test_studio_http import _body, _done, _post, _run, poll_until_done
from tests.app.test_studio_http import services as services  # noqa: F401  (fixture)

UPDATE = "/_dash-update-component"
ITERS = 60
COLUMNS = ["Age", "BPH", "Therapy", "PIRADS score"]


@pytest.fixture(autouse=True)
def _few_iterations(explore_app):
    from app import services_of

    services_of(explore_app).studio.synthetic_iters = ITERS


def _make(client, epsilon, columns, owner_options: dict | None = None):
    """Post the synthetic copy's button as the browser does (``owner_options``: the owner's
    pattern-matching controls, forged by a non-owner in one test)."""
    values = {(ids.ST_SYN_DATASET, "value"): "pirads", (ids.ST_SYN_EPS, "value"): epsilon,
              (ids.ST_SYN_COLUMNS, "value"): columns, (ids.ST_SYN_RUN, "n_clicks"): 1}
    deps = client.get("/_dash-dependencies").json
    body = _body(deps, ids.ST_SYN_JOB, values, {}, (ids.ST_SYN_RUN, "n_clicks"))
    body["state"] = [s if not isinstance(s, list) else
                     [{"id": {"type": ids.ST_SYN_OWNER, "index": k}, "property": "value",
                       "value": v} for k, v in (owner_options or {}).items()]
                     for s in body["state"]]
    resp = client.post(UPDATE, json=body)
    assert resp.status_code == 200, resp.data[:500]
    return resp.json["response"]


def _finish(client, submitted: dict) -> tuple[str, dict]:
    token = submitted[ids.ST_SYN_JOB]["data"]
    assert submitted[ids.ST_SYN_POLL]["disabled"] is False
    assert "Progress of the synthetic copy" in json.dumps(submitted[ids.ST_SYN_PROGRESS])
    return token, poll_until_done(client, ids.ST_SYN_PROGRESS, ids.ST_SYN_JOB, token)


def _download(client, token: str, button: str) -> str | None:
    r = _post(client, ids.ST_SYN_DOWNLOAD, {(ids.ST_SYN_JOB, "data"): token,
                                            (button, "n_clicks"): 1}, (button, "n_clicks"))
    data = r.json["response"].get(ids.ST_SYN_DOWNLOAD, {}).get("data")
    return None if data is None else data["content"]


def _true_statistics(frame: pd.DataFrame) -> dict[str, object]:
    """Statistics of the original an unsafe reply would leak (exact values)."""
    age = pd.to_numeric(frame["Age"], errors="coerce").dropna()
    shares = frame["Therapy"].astype(str).value_counts(normalize=True)
    return {"n": len(frame), "mean": repr(float(age.mean())), "sd": repr(float(age.std())),
            "shares": [repr(float(v)) for v in shares.to_numpy()],
            "counts": np.histogram(age, bins=20)[0].tolist()}


def test_third_party_gets_a_dp_copy_charged_exactly_opendps_epsilon(client, services,
                                                                     session):
    session.set(Role.THIRD_PARTY)
    ds = services.registry.get("pirads")
    before = services.ledger.count_releases()
    token, out = _finish(client, _make(client, 0.5, COLUMNS))
    shown = json.dumps(out[ids.ST_SYN_RESULTS], ensure_ascii=False)
    assert "n̂ =" in shown and "ε charged" in shown and "Pairs of columns measured" in shown
    assert out[ids.ST_SYN_DL_CSV]["disabled"] is False

    # charged once, exactly OpenDP's ε for the measurements run, to the third party's budget
    k = ds.schema.max_rows_per_patient if ds.schema.patient_column else 1
    expected = opendp_epsilon(plan_mst(0.5, len(synth_domain(ds.schema, COLUMNS).attributes),
                                       k))
    assert services.ledger.count_releases() == before + 1
    status = services.ledger.status(role=Role.THIRD_PARTY, dataset_id="pirads",
                                    user="test-third_party")
    assert status.role.spent == expected
    record = services.studio.job(session.current(), token)["result"]
    assert record["epsilon"] == expected and record["owner"] is None
    assert f"#{record['release_id']}" in shown

    # nothing the third party receives holds an original-data value
    csv = _download(client, token, ids.ST_SYN_DL_CSV)
    rep = _download(client, token, ids.ST_SYN_DL_JSON)
    page = _download(client, token, ids.ST_SYN_DL_HTML)
    received = shown + csv + rep + page
    for word in ("original", "Privacy Match", "per-record", "Model check"):
        assert word not in shown, word
    assert json.loads(rep)["synthetic"]["metrics"] is None
    truth = _true_statistics(ds.frame)
    assert truth["mean"] not in received and truth["sd"] not in received
    assert not any(s in received for s in truth["shares"])
    copy = pd.read_csv(io.StringIO(csv))
    assert list(copy.columns) == COLUMNS and len(copy) == record["rows"] != truth["n"]
    assert np.histogram(copy["Age"].dropna(), bins=20)[0].tolist() != truth["counts"]


def test_a_non_owner_gets_no_metrics_and_no_per_record_copy(client, services, session):
    session.set(Role.COLLABORATOR)
    resp = _run(client)                                   # the per-record button, forged
    assert "data owner" in json.dumps(resp.json) and ids.ST_LAST not in resp.json["response"]
    token, out = _finish(client, _make(client, 1.0, COLUMNS,
                                       {"target": "BPH", "compare": ["compare"]}))
    shown = json.dumps(out[ids.ST_SYN_RESULTS], ensure_ascii=False)
    assert "Against the original" not in shown and "Side by side" not in shown
    result = services.studio.job(session.current(), token)["result"]
    assert result["owner"] is None and result["report"]["synthetic"]["comparison"] is None
    rows = services.ledger.releases(dataset_id="pirads")
    assert len(rows) == 1 and rows[0].dp              # the synthetic copy only, no per-record


def test_the_owner_sees_metrics_model_check_and_the_per_record_copy_side_by_side(
        client, services):
    token, out = _finish(client, _make(client, 2.0, COLUMNS,
                                       {"target": "BPH", "compare": ["compare"]}))
    shown = json.dumps(out[ids.ST_SYN_RESULTS], ensure_ascii=False)
    assert "Against the original" in shown and "Model check: predicting BPH" in shown
    assert "Side by side" in shown and "trained on per-record copy" in shown
    rows = services.ledger.releases(dataset_id="pirads")
    assert sorted(r.dp for r in rows) == [False, True]  # the copy and the per-record run
    record = next(r for r in rows if not r.dp)
    assert record.answer["record_epsilon"] == pytest.approx(2.0)
    html = _download(client, token, ids.ST_SYN_DL_HTML)
    assert "Synthetic copy (central DP)" in html and "same total ε" in html


@pytest.mark.parametrize(("epsilon", "columns", "message"),
                         [(-1, COLUMNS, "ε must be above 0"), ("abc", COLUMNS, "number"),
                          (1.0, [], "at least one column"), (1.0, ["nope"], "no column"),
                          (1.0, "Age", "from the list")])
def test_bad_input_is_a_message_and_charges_nothing(client, services, session, epsilon,
                                                    columns, message):
    session.set(Role.THIRD_PARTY)
    out = _make(client, epsilon, columns)
    assert message in json.dumps(out[ids.ST_SYN_MESSAGE], ensure_ascii=False)
    assert ids.ST_SYN_JOB not in out
    assert services.ledger.count_releases() == 0


def test_another_users_token_finds_nothing(client, services, session):
    token, _ = _finish(client, _make(client, 1.0, COLUMNS))
    session.set(Role.OWNER, "another-owner")
    out = _post(client, ids.ST_SYN_PROGRESS, {(ids.ST_SYN_JOB, "data"): token},
                (ids.ST_SYN_POLL, "n_intervals")).json["response"]
    assert "no longer kept" in json.dumps(out[ids.ST_SYN_MESSAGE], ensure_ascii=False)
    assert ids.ST_SYN_RESULTS not in out and _download(client, token, ids.ST_SYN_DL_CSV) is None


def test_a_run_made_through_one_instance_downloads_through_another(explore_app, client,
                                                                  services, tmp_path):
    """Two apps on one data dir stand for two gunicorn workers: the job made and finished
    through the first is polled and downloaded through the second."""
    from app import create_app, services_of
    from tests.app.conftest import SessionAs

    second = create_app({"data_dir": tmp_path}, seed=5)
    services_of(second).identity = SessionAs(Role.OWNER)
    other = second.server.test_client()
    resp = _run(client)
    token = resp.json["response"][ids.ST_LAST]["data"]
    _done(client, resp)
    out = poll_until_done(other, ids.ST_PROGRESS, ids.ST_LAST, token)
    assert "Privacy Match %" in json.dumps(out[ids.ST_RESULTS], ensure_ascii=False)
    r = _post(other, ids.ST_DOWNLOAD, {(ids.ST_LAST, "data"): token,
                                       (ids.ST_DL_CSV, "n_clicks"): 1}, (ids.ST_DL_CSV, "n_clicks"))
    frame = pd.read_csv(io.StringIO(r.json["response"][ids.ST_DOWNLOAD]["data"]["content"]))
    assert len(frame) == 920
    assert services_of(second).ledger.count_releases() == 1   # one shared ledger, one charge


def test_a_running_copy_is_cancelled_by_its_button_and_charges_nothing(client, services,
                                                                       session):
    """Cancel is shown while the copy runs; pressing it stops the fit (at its next progress
    report) and nothing is charged. Another user's press, and a press after the end, do
    nothing."""
    services.studio.synthetic_iters = 10**7          # a fit far longer than the test
    before = services.ledger.count_releases()
    token = _make(client, 1.0, COLUMNS)[ids.ST_SYN_JOB]["data"]
    poll = _post(client, ids.ST_SYN_PROGRESS, {(ids.ST_SYN_JOB, "data"): token},
                 (ids.ST_SYN_POLL, "n_intervals")).json["response"]
    assert poll[ids.ST_SYN_CANCEL]["hidden"] is False              # running: shown

    def press() -> dict:
        return (_post(client, ids.ST_SYN_MESSAGE, {(ids.ST_SYN_JOB, "data"): token,
                                                   (ids.ST_SYN_CANCEL, "n_clicks"): 1},
                     (ids.ST_SYN_CANCEL, "n_clicks")).json or {}).get("response", {})

    me = session.current()
    session.set(Role.OWNER, "another-owner")
    assert press() == {}                                          # not theirs: nothing
    session.identity = me
    pressed = press()
    assert "Cancelling" in json.dumps(pressed[ids.ST_SYN_MESSAGE])
    assert pressed[ids.ST_SYN_CANCEL]["hidden"] is True
    out = poll_until_done(client, ids.ST_SYN_PROGRESS, ids.ST_SYN_JOB, token)
    assert "Cancelled." in json.dumps(out[ids.ST_SYN_MESSAGE])
    assert out[ids.ST_SYN_CANCEL]["hidden"] is True and ids.ST_SYN_RESULTS not in out
    assert services.ledger.count_releases() == before and press() == {}
