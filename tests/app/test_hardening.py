"""The hardened web layer in-process (Flask test client on the real app, users mode):
server-side sessions, POST logout, timeouts, security headers, production cookies, proxies,
body limits before parsing and one answer for unknown and unconfirmed datasets."""

from __future__ import annotations

import base64
import hashlib
import io
import re
import shutil
import tracemalloc
from pathlib import Path

import pytest

from callbacks.server.auth import auth_state
from layouts import ids
from services import cli
from services.config import AppConfig
from services.identity import sessions as sessions_mod
from services.identity.limits import BodyLimits
from services.identity.users import add_user
from services.ops.envfile import read_env_file
from tests.app.dash_http import callback_payload, find_hidden_input

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy"
PASSWORD = "a long enough password"
SECRET = "hardening-secret-" + "s" * 32
MB = 1_000_000


@pytest.fixture(scope="module")
def base_users(tmp_path_factory):
    path = tmp_path_factory.mktemp("users") / "users.json"
    for name, role in [("tina", "third_party"), ("colin", "collaborator"), ("olga", "owner")]:
        add_user(path, name, role, PASSWORD)
    return path


@pytest.fixture
def make_app(base_users, tmp_path, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("COHORT_DATA_DIR", str(tmp_path / "var"))  # the CLI finds the same db
    users = tmp_path / "users.json"
    shutil.copy(base_users, users)

    def make(**overrides):
        from app import create_app

        cfg = {"data_dir": tmp_path / "var", "users_file": users, "secret_key": SECRET,
               **overrides}
        return create_app(cfg, seed=7)

    return make


@pytest.fixture
def app(make_app):
    return make_app()


def login(client, user, password=PASSWORD, **kw):
    page = client.get("/login", **kw)
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    return client.post("/login", data={"username": user, "password": password, "csrf": token,
                                       "next": "/"}, **kw)


def route_reply(client, path="/"):
    deps = client.get("/_dash-dependencies").json
    body = callback_payload(deps, ids.SESSION_BADGE, {(ids.URL, "pathname"): path},
                            (ids.URL, "pathname"))
    return client.post("/_dash-update-component", json=body)


def logout_csrf(client) -> str:
    badge = route_reply(client).json["response"][ids.SESSION_BADGE]["children"]
    token = find_hidden_input(badge, "csrf")
    assert token, "the session badge carries the sign-out form"
    return token


def test_logout_is_a_post_with_csrf_and_the_old_cookie_opens_nothing_anywhere(app):
    browser, other = app.server.test_client(), app.server.test_client()
    assert login(browser, "tina").status_code == 302
    other.set_cookie("cohort_session", browser.get_cookie("cohort_session").value)
    assert other.get("/_dash-layout").status_code == 200  # a copied cookie works ... for now
    browser.get("/logout")  # no GET logout: a cross-site link or image cannot sign anyone out
    assert browser.get("/_dash-layout").status_code == 200
    assert browser.post("/logout", data={"csrf": "forged"}).status_code == 400
    assert browser.get("/_dash-layout").status_code == 200
    res = browser.post("/logout", data={"csrf": logout_csrf(browser)})
    assert res.status_code == 302 and res.headers["Location"] == "/login"
    assert browser.get("/_dash-layout").status_code == 401
    assert other.get("/_dash-layout").status_code == 401  # revoked on the server
    assert auth_state(app.server).sessions.count("tina") == 0


def test_idle_and_absolute_timeouts_end_sessions(make_app, monkeypatch):
    app = make_app(session_idle_minutes=30, session_max_hours=2)
    clock = [1_700_000_000.0]
    monkeypatch.setattr(sessions_mod, "clock", lambda: clock[0])
    idle, busy = app.server.test_client(), app.server.test_client()
    login(idle, "tina")
    login(busy, "colin")
    for _ in range(4):  # colin keeps working every 25 minutes, tina does not
        clock[0] += 25 * 60
        assert busy.get("/_dash-layout").status_code == 200
    assert idle.get("/_dash-layout").status_code == 401  # idle for 1 h 40 min
    clock[0] += 25 * 60
    assert busy.get("/_dash-layout").status_code == 401  # 2 h 5 min after sign-in


def test_password_change_and_cli_revocation_end_sessions(app, capsys):
    users = auth_state(app.server).store.path
    olga, tina = app.server.test_client(), app.server.test_client()
    login(olga, "olga")
    login(tina, "tina")
    add_user(users, "olga", "owner", "a brand new password", replace=True)
    assert olga.get("/_dash-layout").status_code == 401
    assert cli.main(["revoke-sessions", "tina"]) == 0
    assert "Ended 1 session(s) of 'tina'" in capsys.readouterr().out
    assert tina.get("/_dash-layout").status_code == 401
    assert login(tina, "tina").status_code == 302  # signing in again works


# -- security headers ---------------------------------------------------------------------------

PAGES = ["/", "/explore", "/data", "/ledger", "/anonymize", "/no-such-page"]
OTHER = ["/_dash-layout", "/_dash-dependencies", "/assets/app.css", "/_favicon.ico"]


def _check_headers(res, script_hashes):
    h = res.headers
    csp = dict(part.strip().split(" ", 1) for part in h["Content-Security-Policy"].split(";"))
    assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'"
    assert "'unsafe-inline'" not in csp["script-src"] and "'unsafe-eval'" not in csp["script-src"]
    assert set(script_hashes) <= set(csp["script-src"].split())
    assert h["X-Content-Type-Options"] == "nosniff" and h["X-Frame-Options"] == "DENY"
    assert h["Referrer-Policy"] == "same-origin"
    assert h["Strict-Transport-Security"].startswith("max-age=31536000")


def _inline_script_hashes(index_html: str) -> list[str]:
    """CSP hashes of the executable inline scripts Dash put in the page."""
    found = []
    live = re.sub(r"<!--.*?-->", "", index_html, flags=re.S)  # e.g. the <!--[if IE]> warning
    for attrs, body in re.findall(r"<script([^>]*)>(.*?)</script>", live, re.S):
        if "src=" in attrs or "application/json" in attrs or not body.strip():
            continue
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        found.append(f"'sha256-{digest}'")
    return found


def test_security_headers_on_every_page_and_every_answer(app):
    client = app.server.test_client()
    anonymous = [client.get(p) for p in PAGES + OTHER] + [client.get("/login"),
                                                          client.get("/logout")]
    signed_in = [login(client, "olga")]
    index = client.get("/")
    hashes = _inline_script_hashes(index.text)
    assert hashes, "Dash's renderer is an inline script; the CSP must allow it by hash"
    signed_in += [client.get(p) for p in PAGES + OTHER] + [
        route_reply(client, p) for p in PAGES] + [
        post_stream(client, "/_dash-update-component", CountingStream(200 * MB))]
    statuses = {r.status_code for r in anonymous + signed_in}
    assert {200, 302, 401, 413} <= statuses
    for res in anonymous + signed_in:
        _check_headers(res, hashes)


def test_embedded_mode_sends_the_same_headers(tmp_path):
    from app import create_app

    client = create_app({"data_dir": tmp_path, "users_file": None}).server.test_client()
    res = client.get("/", environ_base={"REMOTE_ADDR": "127.0.0.1"})
    _check_headers(res, _inline_script_hashes(res.text))
    _check_headers(client.get("/", environ_base={"REMOTE_ADDR": "10.0.0.9"}), [])  # the 403


# -- production configuration ------------------------------------------------------------------

def test_the_documented_production_config_starts_with_secure_cookies(base_users, tmp_path):
    from app import create_app

    env = read_env_file(DEPLOY / "cohort.env")
    env.update(COHORT_USERS_FILE=str(base_users), SECRET_KEY=SECRET,
               DATABASE_URL=f"sqlite:///{tmp_path / 'prod.sqlite'}",
               COHORT_DATA_DIR=str(tmp_path / "var"))
    cfg = AppConfig.from_env(env)
    assert cfg.cookie_secure is True and cfg.proxy_count == 1
    client = create_app(cfg).server.test_client()
    proxied = {"Host": "127.0.0.1:8050", "X-Forwarded-Proto": "https",
               "X-Forwarded-Host": "cohort.hospital.example", "X-Forwarded-For": "203.0.113.9"}
    res = login(client, "tina", headers=proxied)
    assert res.status_code == 302
    cookie = res.headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert res.headers["Location"] == "/"
    # the proxy's own view: gunicorn on loopback only, nginx lets the owner's upload through
    conf: dict = {}
    exec((DEPLOY / "gunicorn.conf.py").read_text(), conf)
    assert conf["bind"].startswith("127.0.0.1:")
    nginx = (DEPLOY / "nginx.conf").read_text()
    size_mib = int(re.search(r"client_max_body_size (\d+)m;", nginx).group(1))
    assert size_mib * 2**20 >= BodyLimits.for_upload(cfg.max_upload_bytes).owner
    assert "X-Forwarded-Proto $scheme" in nginx and "return 301 https://" in nginx


@pytest.mark.parametrize("host,secure", [("cohort.hospital.example", True),
                                         ("10.1.2.3:8050", True), ("localhost:8050", False),
                                         ("127.0.0.1:8050", False)])
def test_cookies_are_secure_by_default_off_loopback(app, host, secure):
    res = login(app.server.test_client(), "tina", headers={"Host": host})
    assert res.status_code == 302
    assert ("Secure" in res.headers["Set-Cookie"]) is secure


def test_plain_http_off_loopback_is_told_to_use_https(app):
    page = app.server.test_client().get("/login", headers={"Host": "cohort.hospital.example"})
    assert "plain HTTP" in page.text and "https://" in page.text


def test_client_address_comes_from_the_proxy_only_when_one_is_configured(make_app):
    for proxies, expected in [(1, "203.0.113.9"), (0, "127.0.0.1")]:
        app = make_app(proxy_count=proxies)
        login(app.server.test_client(), "tina", "wrong password!!",
              headers={"X-Forwarded-For": "203.0.113.9"})
        rows = auth_state(app.server).throttle.failed_logins()
        assert rows[0].client == expected and rows[0].user == "tina"


# -- body limits before parsing -----------------------------------------------------------------

class CountingStream(io.RawIOBase):
    """A request body of ``size`` bytes that is never held in memory; counts what is read."""

    def __init__(self, size: int) -> None:
        self.size, self.read_bytes = size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.read_bytes)
        buffer[:n] = b"{" * n
        self.read_bytes += n
        return n


def post_stream(client, path: str, body: CountingStream, *, chunked: bool = False):
    """POST ``body`` as the WSGI input, with its Content-Length or chunked without one."""
    environ = {"wsgi.input": body, "CONTENT_LENGTH": "" if chunked else str(body.size)}
    if chunked:
        environ.update({"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input_terminated": True})
    return client.post(path, content_type="application/json", environ_overrides=environ)


@pytest.mark.parametrize("who", [None, "tina", "colin", "olga"])
@pytest.mark.parametrize("path", ["/_dash-update-component", "/login", "/"])
def test_a_200_mb_body_gets_413_before_a_byte_is_read(app, who, path):
    client = app.server.test_client()
    if who:
        login(client, who)
    body = CountingStream(200 * MB)
    tracemalloc.start()
    try:
        res = post_stream(client, path, body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.status_code == 413 and "Nothing was read" in res.text
    assert body.read_bytes == 0
    assert peak < 5 * MB  # the test process's memory stays flat


@pytest.mark.parametrize("who,size,refused", [
    (None, 20_000, True), ("tina", 600_000, True), ("colin", 600_000, True),
    ("olga", 600_000, False), ("olga", 70 * MB, True),
])
def test_limits_depend_on_the_session_role(app, who, size, refused):
    client = app.server.test_client()
    if who:
        login(client, who)
    body = CountingStream(size)
    res = post_stream(client, "/_dash-update-component", body)
    assert (res.status_code == 413) is refused
    assert (body.read_bytes == 0) is refused


@pytest.mark.parametrize("who", [None, "tina", "olga"])
def test_a_chunked_body_without_a_length_is_refused_unread(app, who):
    client = app.server.test_client()
    if who:
        login(client, who)
    body = CountingStream(200 * MB)
    res = post_stream(client, "/_dash-update-component", body, chunked=True)
    assert res.status_code == 411 and body.read_bytes == 0


# -- one answer for unknown and unconfirmed ----------------------------------------------------

def test_unconfirmed_and_unknown_datasets_get_one_answer(app):
    from app import services_of

    csv = b"Age,BPH\n" + b"\n".join(f"{50 + i % 30},{'yes' if i % 3 else 'no'}".encode()
                                    for i in range(60))
    hidden = services_of(app).registry.add_upload("secret-trial.csv", csv)
    client = app.server.test_client()
    login(client, "tina")
    deps = client.get("/_dash-dependencies").json

    def message(dataset: str) -> str:
        body = callback_payload(deps, ids.EX_MESSAGE, {(ids.EX_DATASET, "value"): dataset,
                                                      (ids.EX_VIEW, "value"): "histogram",
                                                      (ids.EX_X, "value"): "Age"},
                                (ids.EX_DATASET, "value"))
        res = client.post("/_dash-update-component", json=body)
        return str(res.json["response"][ids.EX_MESSAGE]["children"])

    assert message(hidden.id) == message("no-such-upload").replace("no-such-upload", hidden.id)

