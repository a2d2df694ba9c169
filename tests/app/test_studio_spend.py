"""Spend only on purpose in the studio (issue 21 item 6, issue 23 item 4): a non-owner's
synthetic copy whose price would take more than a quarter of what the role (or user) has left
asks first, with the exact price on a confirm button, and charges that price once confirmed;
a confirm for another request asks again; small spends and the owner's go at once. Per-record
runs are the owner's only, whatever a non-owner's browser sends."""

from __future__ import annotations

import json

import numpy as np
import pytest

from layouts import ids
from services.identity.roles import Role
from services.identity.session import Identity
from services.studio import pgm
from tests.app.conftest import SessionAs
from tests.app.test_studio_http import _body, _post, _run, poll_until_done
from tests.app.test_studio_service import CHOICES

UPDATE = "/_dash-update-component"
COLUMNS = ["Age", "BPH", "Therapy"]
TINA = Identity("tina", Role.THIRD_PARTY, True)


@pytest.fixture
def app(tmp_path, monkeypatch):
    from app import create_app, services_of

    def codes(m, rng, *, iters=0, progress=None):   # mbi's fit is post-processing: not
        sizes = np.asarray(m.domain.sizes)           # what this test is about
        return (rng.random((m.rows, len(sizes))) * sizes).astype(np.intp)

    monkeypatch.setattr(pgm, "synthesize_codes", codes)
    app = create_app({"data_dir": tmp_path, "budgets": {"third_party": 2.0}}, seed=5)
    services_of(app).identity = SessionAs(Role.THIRD_PARTY, "tina")
    return app


@pytest.fixture
def services(app):
    from app import services_of

    return services_of(app)


def _ask(client, epsilon, *, confirm_for: dict | None = None) -> dict:
    """Press 'Make synthetic copy' (or, with ``confirm_for``, the confirm button with the
    request it was shown for) as the browser does."""
    button = ids.ST_SYN_CONFIRM if confirm_for is not None else ids.ST_SYN_RUN
    values = {(ids.ST_SYN_DATASET, "value"): "pirads", (ids.ST_SYN_EPS, "value"): epsilon,
              (ids.ST_SYN_COLUMNS, "value"): COLUMNS, (button, "n_clicks"): 1,
              (ids.ST_SYN_PENDING, "data"): confirm_for}
    deps = client.get("/_dash-dependencies").json
    body = _body(deps, ids.ST_SYN_JOB, values, {}, (button, "n_clicks"))
    resp = client.post(UPDATE, json=body)
    assert resp.status_code == 200, resp.data[:500]
    return resp.json["response"]


def _spent(services) -> float:
    return services.ledger.status(role=Role.THIRD_PARTY, dataset_id="pirads",
                                  user="tina").role.spent


def test_a_large_synthetic_copy_asks_first_then_charges_the_price_shown(app, services):
    client = app.server.test_client()
    asked = _ask(client, 1.0)
    assert ids.ST_SYN_JOB not in asked                    # nothing queued
    message = json.dumps(asked[ids.ST_SYN_MESSAGE], ensure_ascii=False)
    assert "more than a quarter of what your role has left (ε 2)" in message
    assert asked[ids.ST_SYN_CONFIRM_BOX]["hidden"] is False
    label = asked[ids.ST_SYN_CONFIRM]["children"]
    price = float(label.split("ε ")[1].split(":")[0])
    assert label == f"Spend ε {price:.3g}: make the copy" and price > 0.25 * 2.0
    assert services.ledger.count_releases() == 0 and _spent(services) == 0.0

    # a confirm for another request (ε changed since) asks again, at the new price
    pending = asked[ids.ST_SYN_PENDING]["data"]
    again = _ask(client, 1.5, confirm_for=pending)
    assert ids.ST_SYN_JOB not in again and services.ledger.count_releases() == 0
    assert again[ids.ST_SYN_CONFIRM]["children"] != label

    # the confirm for the request it was shown for: queued, charged exactly that price
    done = _ask(client, 1.0, confirm_for=pending)
    token = done[ids.ST_SYN_JOB]["data"]
    assert done[ids.ST_SYN_CONFIRM_BOX]["hidden"] is True
    poll_until_done(client, ids.ST_SYN_PROGRESS, ids.ST_SYN_JOB, token)
    assert services.ledger.count_releases() == 1
    assert _spent(services) == pytest.approx(price, rel=5e-3)


def test_a_small_synthetic_copy_and_the_owners_go_at_once(app, services):
    client = app.server.test_client()
    small = _ask(client, 0.3)                             # 0.3 <= a quarter of 2
    assert small[ids.ST_SYN_JOB]["data"] and small[ids.ST_SYN_CONFIRM_BOX]["hidden"] is True
    services.identity.set(Role.OWNER, "olga")
    owner = _ask(client, 10.0)
    assert owner[ids.ST_SYN_JOB]["data"]


def test_per_record_runs_are_the_owners_only(app, services):
    from dp_engine.errors import DPError
    from dp_engine.release import Tolerances

    client = app.server.test_client()
    for tune in (False, True):                             # the browser's Run and Auto-tune
        out = _run(client, tune=tune).json["response"]
        assert ids.ST_LAST not in out and "data owner" in json.dumps(out[ids.ST_MESSAGE])
    with pytest.raises(DPError, match="owner"):
        services.studio.start_record(TINA, "pirads", CHOICES)
    with pytest.raises(DPError, match="owner"):
        services.studio.start_record(TINA, "pirads", CHOICES,
                                     tune=(Tolerances(max_ks=0.1), 10.0))
    with pytest.raises(DPError, match="owner"):
        services.studio.insist(TINA, "0" * 32)
    insisted = _post(client, ids.ST_DL_CSV, {(ids.ST_LAST, "data"): "0" * 32,
                                             (ids.ST_INSIST, "value"): ["insist"]},
                     (ids.ST_INSIST, "value")).json["response"]
    assert insisted[ids.ST_DL_CSV]["disabled"] is True
    assert services.ledger.count_releases() == 0
    page = json.dumps(_post(client, ids.PAGE_CONTENT,
                            {(ids.PAGE_LOCATION, "pathname"): "/release"},
                            (ids.PAGE_LOCATION, "pathname")).json["response"])
    for control in (ids.ST_RUN, ids.ST_TUNE, ids.ST_INSIST, ids.ST_DL_CSV):
        assert f'"{control}"' not in page
    assert "Synthetic copy" in page
