"""The hardened web layer through gunicorn (the real app, users mode), two worker processes on
one data directory: a logged-out cookie is refused by both workers, the login throttle is
shared by the workers and releases after its backoff, a 200 MB body gets 413 from every role
without the workers reading it, and a schema with 10^5 histogram bins is refused with a
message.
"""

from __future__ import annotations

import json
import time

import psutil
import pytest

from layouts import ids
from layouts.data.page import schema_rows
from services.data.registry import SAMPLE_SCHEMA, read_schema_file
from services.identity.users import add_user
from tests.app.dash_http import callback_payload
from tests.app.gunicorn_app import GUNICORN, Client, GunicornApp, post_huge

pytestmark = pytest.mark.skipif(GUNICORN is None, reason="gunicorn is not installed")
PASSWORD = "a long enough password"
BACKOFF_S = 6
MAX_FAILURES = 3
MB = 1_000_000


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two gunicorn masters (one worker each) on one data directory: what one worker writes,
    the other must see. Each is addressed by its own port, so both always answer."""
    tmp = tmp_path_factory.mktemp("hardening-http")
    users = tmp / "users.json"
    for name, role in [("tina", "third_party"), ("olga", "owner"), ("otto", "owner")]:
        add_user(users, name, role, PASSWORD)
    env = {
        "COHORT_USERS_FILE": str(users), "SECRET_KEY": "http-hardening-" + "k" * 40,
        "COHORT_DATA_DIR": str(tmp / "var"),
        "DATABASE_URL": f"sqlite:///{tmp / 'var' / 'ledger.sqlite'}",  # both masters share it
        "COHORT_LOGIN_MAX_FAILURES": str(MAX_FAILURES),
        "COHORT_LOGIN_CLIENT_MAX_FAILURES": "100",
        "COHORT_LOGIN_BACKOFF_SECONDS": str(BACKOFF_S),
        "COHORT_LOGIN_BACKOFF_MAX_SECONDS": str(BACKOFF_S),
    }
    started: list[GunicornApp] = []
    try:
        for name in ("a", "b"):  # one after the other: the first creates the stores
            srv = GunicornApp(env, tmp / name, workers=1)
            started.append(srv)
            srv.start()
        yield started
    finally:
        for srv in started:
            srv.stop()


def test_a_logged_out_cookie_is_refused_by_both_workers(servers):
    first, second = servers
    browser = Client(first)
    assert browser.login("tina", PASSWORD).status == 302
    stolen = Client(first, dict(browser.cookies))  # a copy in another browser
    answers = [stolen.on(srv).request("GET", "/_dash-layout") for srv in servers]
    assert [r.status for r in answers] == [200, 200]
    assert len({r.pid for r in answers}) == 2
    out = browser.logout()
    assert out.status == 302 and "cohort_session" not in browser.cookies
    # revoked in the shared store: the worker that did not see the logout refuses it too
    assert [stolen.on(srv).request("GET", "/_dash-layout").status
            for srv in (second, first)] == [401, 401]


def test_the_throttle_is_shared_by_the_workers_and_releases_after_the_backoff(servers):
    first, second = servers
    client = Client(first)
    failures = [client.login("otto", "wrong password!!") for _ in range(MAX_FAILURES)]
    assert [r.status for r in failures] == [401] * MAX_FAILURES
    # tripped for this account on every worker, even with the right password ...
    for srv in (second, first):
        refusal = client.on(srv).login("otto", PASSWORD)
        assert refusal.status == 429 and "retry-after" in refusal.headers, refusal.status
    # ... for a while only: after the backoff the right password opens a session
    time.sleep(BACKOFF_S + 0.5)
    again = client.on(second)
    assert again.login("otto", PASSWORD).status == 302
    assert again.request("GET", "/_dash-layout").status == 200


@pytest.mark.parametrize("who", [None, "tina", "olga"])
def test_a_200_mb_body_gets_413_from_any_role_without_being_read(servers, who):
    client = Client(servers[0])
    if who:
        assert client.login(who, PASSWORD).status == 302
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    workers = [psutil.Process(pid) for srv in servers for pid in srv.workers()]
    before = [w.memory_info().rss for w in workers]
    for srv in servers * 2:  # each worker gets two
        status, sent = post_huge(srv.port, "/_dash-update-component", 200 * MB, cookie)
        assert status == 413
        assert sent < 50 * MB  # answered long before the body was sent
    growth = [w.memory_info().rss - b for w, b in zip(workers, before, strict=True)]
    assert max(growth) < 20 * MB, growth  # the workers never held the body


def test_a_schema_with_1e5_bins_is_refused_with_a_message(servers):
    owner = Client(servers[0])
    assert owner.login("olga", PASSWORD).status == 302
    rows = schema_rows(read_schema_file(SAMPLE_SCHEMA))
    age = next(r for r in rows if r["name"].lower() == "age")
    age.update(lower="0", upper="110", bin_width="0.0011")
    deps = json.loads(owner.request("GET", "/_dash-dependencies").body)
    body = callback_payload(deps, ids.DATA_MESSAGE, {(ids.DATA_LIST, "value"): "pirads",
                                                     (ids.DATA_SAVE, "n_clicks"): 1,
                                                     (ids.DATA_TABLE, "data"): rows},
                            (ids.DATA_SAVE, "n_clicks"))
    reply = owner.post_json(body)
    assert reply.status == 200
    message = json.dumps(json.loads(reply.body)["response"][ids.DATA_MESSAGE])
    assert "100,000 histogram bins" in message and "at most 1,000" in message
