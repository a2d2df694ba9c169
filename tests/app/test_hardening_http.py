"""The hardened web layer through ``gunicorn -w 2 app:server`` (the real app, users mode):
a logged-out cookie is refused by both workers, the login throttle is shared by the workers
and releases after its backoff, a 200 MB body gets 413 from every role without the workers
reading it, and a schema with 10^5 histogram bins is refused with a message.
"""

from __future__ import annotations

import json
import time

import psutil
import pytest

from layouts import ids
from layouts.data import schema_rows
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
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hardening-http")
    users = tmp / "users.json"
    for name, role in [("tina", "third_party"), ("olga", "owner"), ("otto", "owner")]:
        add_user(users, name, role, PASSWORD)
    srv = GunicornApp({
        "COHORT_USERS_FILE": str(users), "SECRET_KEY": "http-hardening-" + "k" * 40,
        "COHORT_DATA_DIR": str(tmp / "var"), "DATABASE_URL": "",
        "COHORT_LOGIN_MAX_FAILURES": str(MAX_FAILURES),
        "COHORT_LOGIN_CLIENT_MAX_FAILURES": "100",
        "COHORT_LOGIN_BACKOFF_SECONDS": str(BACKOFF_S),
        "COHORT_LOGIN_BACKOFF_MAX_SECONDS": str(BACKOFF_S),
    }, tmp)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def until_both_workers(server, send, expect, tries: int = 60) -> set[int]:
    """Repeat ``send()`` until both workers answered; every answer must satisfy ``expect``."""
    seen: set[int] = set()
    for _ in range(tries):
        reply = send()
        assert expect(reply), (reply.status, reply.body[:300])
        seen.add(reply.pid)
        if seen >= set(server.workers()):
            return seen
    raise AssertionError(f"only workers {seen} answered in {tries} tries")


def test_a_logged_out_cookie_is_refused_by_both_workers(server):
    browser = Client(server)
    assert browser.login("tina", PASSWORD).status == 302
    stolen = Client(server, dict(browser.cookies))  # a copy in another browser
    until_both_workers(server, lambda: stolen.request("GET", "/_dash-layout"),
                       lambda r: r.status == 200)
    out = browser.logout()
    assert out.status == 302 and "cohort_session" not in browser.cookies
    until_both_workers(server, lambda: stolen.request("GET", "/_dash-layout"),
                       lambda r: r.status == 401)


def test_the_throttle_is_shared_by_the_workers_and_releases_after_the_backoff(server):
    client = Client(server)
    failures = [client.login("otto", "wrong password!!") for _ in range(MAX_FAILURES)]
    assert [r.status for r in failures] == [401] * MAX_FAILURES
    # tripped for this account on every worker, even with the right password ...
    refusals = until_both_workers(server, lambda: client.login("otto", PASSWORD),
                                  lambda r: r.status == 429 and "retry-after" in r.headers)
    assert len(refusals) == 2
    # ... for a while only: after the backoff the right password opens a session
    time.sleep(BACKOFF_S + 0.5)
    assert client.login("otto", PASSWORD).status == 302
    assert client.request("GET", "/_dash-layout").status == 200


@pytest.mark.parametrize("who", [None, "tina", "olga"])
def test_a_200_mb_body_gets_413_from_any_role_without_being_read(server, who):
    client = Client(server)
    if who:
        assert client.login(who, PASSWORD).status == 302
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    workers = [psutil.Process(pid) for pid in server.workers()]
    before = [w.memory_info().rss for w in workers]
    for _ in range(4):  # several tries, so both workers are likely to get one
        status, sent = post_huge(server.port, "/_dash-update-component", 200 * MB, cookie)
        assert status == 413
        assert sent < 50 * MB  # answered long before the body was sent
    growth = [w.memory_info().rss - b for w, b in zip(workers, before, strict=True)]
    assert max(growth) < 20 * MB, growth  # the workers never held the body


def test_a_schema_with_1e5_bins_is_refused_with_a_message(server):
    owner = Client(server)
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
