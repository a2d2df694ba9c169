"""Release page callbacks over HTTP (issue 15): the studio's run callback refuses non-owners and
bad input without charging, a run is queued as a job and polled until done (bounded polls),
charged once, auto-tune charges each try, downloads come from the owner's own runs only."""

from __future__ import annotations

import base64
import io
import json
import time

import pandas as pd
import pytest

from layouts import ids
from services.identity.roles import Role

UPDATE = "/_dash-update-component"
CHOICES = {"Age": ("bounded_laplace", 1.0, "range"),
           "Number_of_Lesions": ("laplace", 0.5, "one"),
           "BPH": ("randomized_response", 1.0, None),
           "Therapy": ("exponential", 0.5, None),
           "ProcedureValidatingPhysicianName": ("mask", None, None)}
PER_COLUMN = {ids.ST_TECH: 0, ids.ST_EPS: 1, ids.ST_SENS: 2}


def _body(deps: list[dict], output_id: str, values: dict, columns: dict,
          changed: tuple[str, str]) -> dict:
    """A callback call as the browser sends it, pattern-matching lists filled per column."""
    dep = next(d for d in deps if d["output"].strip(".").startswith(f"{output_id}.")
               and any(i["id"] == changed[0] for i in d["inputs"]))

    def item(spec: dict, value_of) -> dict | list:
        if not spec["id"].startswith("{"):
            return {**spec, "value": value_of(spec)}
        kind = json.loads(spec["id"])["type"]
        return [{"id": {"type": kind, "index": name}, "property": spec["property"],
                 "value": row[PER_COLUMN[kind]]} for name, row in columns.items()
                if kind in PER_COLUMN]

    outputs = []
    for part in dep["output"].strip(".").split("..."):
        cid, prop = part.rsplit(".", 1)
        if cid.startswith("{"):
            kind = json.loads(cid)["type"]
            outputs.append([{"id": {"type": kind, "index": n}, "property": prop}
                            for n in columns])
        else:
            outputs.append({"id": cid, "property": prop})
    return {"output": dep["output"], "outputs": outputs,
            "inputs": [item(i, lambda s: values.get((s["id"], s["property"])))
                       for i in dep["inputs"]],
            "state": [item(s, lambda s: values.get((s["id"], s["property"])))
                      for s in dep["state"]],
            "changedPropIds": [f"{changed[0]}.{changed[1]}"]}


def _post(client, output_id: str, values: dict, changed: tuple[str, str],
          columns: dict | None = None):
    deps = client.get("/_dash-dependencies").json
    resp = client.post(UPDATE, json=_body(deps, output_id, values, columns or CHOICES, changed))
    assert resp.status_code in (200, 204), resp.data[:500]
    return resp


def _run(client, columns: dict | None = None, *, tune: bool = False,
         extra: dict | None = None):
    button = ids.ST_TUNE if tune else ids.ST_RUN
    values = {(ids.ST_DATASET, "value"): "pirads", (ids.ST_TARGET, "value"): "BPH",
              (button, "n_clicks"): 1, **(extra or {})}
    return _post(client, ids.ST_RESULTS, values, (button, "n_clicks"), columns)


def poll_until_done(client, progress_id: str, store_id: str, token: str,
                    polls: int = 600) -> dict:
    """Post the job's poll callback until it stops polling (at most ``polls`` times); the
    last response. Each poll waits a little: the job runs in a background thread."""
    for n in range(polls):
        out = _post(client, progress_id, {(store_id, "data"): token},
                    (progress_id.replace("progress", "poll"), "n_intervals")).json["response"]
        if any(k.endswith("poll") and v.get("disabled") is True for k, v in out.items()):
            return out
        time.sleep(0.05 if n < 20 else 0.2)
    raise AssertionError(f"the job was not done after {polls} polls")


def _done(client, resp) -> dict:
    """The finished job's poll response, after the run callback queued it."""
    out = resp.json["response"]
    assert out[ids.ST_POLL]["disabled"] is False and "progressbar" in json.dumps(
        out[ids.ST_PROGRESS])
    return poll_until_done(client, ids.ST_PROGRESS, ids.ST_LAST, out[ids.ST_LAST]["data"])


@pytest.fixture
def services(explore_app):
    from app import services_of

    return services_of(explore_app)


def _unsound(services) -> float:
    return services.ledger.status(role=Role.OWNER, dataset_id="pirads",
                                  user="test-owner").dataset.unsound_loss


def test_non_owner_is_refused_and_nothing_is_charged(client, services, session):
    session.set(Role.COLLABORATOR)
    resp = _run(client)
    text = json.dumps(resp.json)
    assert "data owner" in text and ids.ST_RESULTS not in resp.json["response"]
    assert services.ledger.count_releases() == 0
    page = _post(client, ids.PAGE_CONTENT, {(ids.PAGE_LOCATION, "pathname"): "/release"},
                 (ids.PAGE_LOCATION, "pathname")).json["response"][ids.PAGE_CONTENT]["children"]
    assert ids.ST_RUN not in json.dumps(page) and "Synthetic copy" in json.dumps(page)


def test_bad_input_shows_the_column_message_and_charges_nothing(client, services):
    bad = {**CHOICES, "Age": ("bounded_laplace", -1, "range"),
           "BPH": ("laplace", 1.0, None), "Therapy": ("no-such-technique", 1.0, None)}
    resp = _run(client, bad)
    out = resp.json["response"]
    messages = {json.loads(k)["index"]: v["children"] for k, v in out.items()
                if k.startswith("{")}
    assert "greater than 0" in messages["Age"]
    assert "does not fit" in messages["BPH"]
    assert "choose a technique" in messages["Therapy"]
    assert messages["Number_of_Lesions"] == ""
    assert "Nothing was run or charged" in json.dumps(out[ids.ST_MESSAGE])
    assert services.ledger.count_releases() == 0 and _unsound(services) == 0


def test_a_run_charges_once_and_its_downloads_are_the_owners(client, services, session):
    page = json.dumps(_post(client, ids.PAGE_CONTENT,
                            {(ids.PAGE_LOCATION, "pathname"): "/release"},
                            (ids.PAGE_LOCATION, "pathname")).json["response"][ids.PAGE_CONTENT])
    assert ids.ST_RUN in page and page.count(ids.ST_COLMSG) == 16 and "NOT central" in page
    resp = _run(client)
    run_id = resp.json["response"][ids.ST_LAST]["data"]
    out = _done(client, resp)
    shown = json.dumps(out[ids.ST_RESULTS])
    assert "Privacy Match %" in shown and "Model check" in shown and '"type": "pie"' in shown
    assert services.ledger.count_releases() == 1
    assert _unsound(services) == pytest.approx(1.0 + 0.5 + 1.0 + 0.5)
    assert out[ids.ST_DL_CSV]["disabled"] is False

    def download(button: str) -> dict | None:
        r = _post(client, ids.ST_DOWNLOAD, {(ids.ST_LAST, "data"): run_id,
                                            (button, "n_clicks"): 1}, (button, "n_clicks"))
        return r.json["response"].get(ids.ST_DOWNLOAD, {}).get("data")

    csv = download(ids.ST_DL_CSV)
    text = csv["content"] if not csv.get("base64") else base64.b64decode(csv["content"]).decode()
    frame = pd.read_csv(io.StringIO(text))
    assert list(frame.columns) == list(CHOICES) and len(frame) == 920
    assert frame["Age"].between(20, 100).all()
    rep = json.loads(download(ids.ST_DL_JSON)["content"])
    assert rep["ledger_release_id"] is not None and rep["central_dp"] is False
    assert rep["model_check"]["target"] == "BPH" and "NOT central" in rep["guarantee"]
    assert "<table>" in download(ids.ST_DL_HTML)["content"]
    assert services.ledger.count_releases() == 1          # downloads charge nothing
    session.set(Role.OWNER, "another-owner")              # another user cannot fetch it
    assert download(ids.ST_DL_CSV) is None


def test_auto_tune_charges_each_try_and_shows_the_trail(client, services):
    # KS 0 is never met; tries cost 3, then 6; the third (12) would pass the budget of 10
    resp = _run(client, tune=True, extra={(ids.ST_TOL_KS, "value"): 0,
                                          (ids.ST_TUNE_BUDGET, "value"): 10})
    out = _done(client, resp)
    trail = json.dumps(out[ids.ST_TRAIL])
    assert "Auto-tune trail" in trail and "would cost" in trail
    assert services.ledger.count_releases() == 2
    assert _unsound(services) == pytest.approx(9.0)
