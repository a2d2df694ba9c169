"""Login through HTTP on a real Dash app: every route is closed without a session."""

from __future__ import annotations

import re
import shutil
from urllib.parse import parse_qs, urlsplit

import pytest
from dash import Dash, Input, Output, dcc, html

from callbacks import login as login_routes
from callbacks.server.auth import current_identity, init_auth, logout_token
from services.identity.users import add_user, remove_user

PASSWORD = "a long enough password"
SECRET = "test-secret-" + "k" * 32

UPDATE = {
    "output": "out.children",
    "outputs": {"id": "out", "property": "children"},
    "inputs": [{"id": "inp", "property": "value", "value": "owner"}],  # a forged role asked for
    "changedPropIds": ["inp.value"],
    "state": [],
}

# every kind of route a Dash app serves
API_ROUTES = [
    ("GET", "/_dash-layout"),
    ("GET", "/_dash-dependencies"),
    ("POST", "/_dash-update-component"),
    ("GET", "/_dash-component-suites/dash/deps/polyfill@7.v4_4_1m1.12.1.min.js"),
    ("GET", "/assets/style.css"),
    ("GET", "/_favicon.ico"),
    ("GET", "/_reload-hash"),
    ("GET", "/"),
    ("GET", "/explore"),
    ("GET", "/ledger?user=x"),
]


@pytest.fixture(scope="module")
def base_users_file(tmp_path_factory):
    """Hashing is deliberately slow, so hash once per module and copy per test."""
    path = tmp_path_factory.mktemp("users") / "users.json"
    add_user(path, "tina", "third_party", PASSWORD)
    add_user(path, "olga", "owner", PASSWORD)
    return path


@pytest.fixture
def users_file(base_users_file, tmp_path):
    path = tmp_path / "users.json"
    shutil.copy(base_users_file, path)
    return path


@pytest.fixture
def app(users_file, tmp_path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "style.css").write_text("body{}")
    dash_app = Dash(__name__, assets_folder=str(tmp_path / "assets"))
    dash_app.layout = html.Div([dcc.Input(id="inp", value="owner"), html.Div(id="out")])

    @dash_app.callback(Output("out", "children"), Input("inp", "value"))
    def show(requested):
        ident = current_identity()
        granted = ident.role.clamp(requested)
        return f"{ident.user}:{ident.role.value}:{granted.value}"

    init_auth(dash_app.server, {"USERS_FILE": str(users_file), "SECRET_KEY": SECRET,
                                "DATABASE_URL": f"sqlite:///{tmp_path / 'identity.sqlite'}",
                                "LOGIN_MAX_FAILURES": 3, "LOGIN_BACKOFF_SECONDS": 30})
    login_routes.register(dash_app.server)
    dash_app.server.add_url_rule("/csrf-for-test", "csrf_for_test",
                                 lambda: {"csrf": logout_token()})
    dash_app.server.config["TESTING"] = True
    return dash_app


def logout(client):
    """Sign out as the page's form does: POST with the session's CSRF token."""
    token = client.get("/csrf-for-test").json["csrf"]
    return client.post("/logout", data={"csrf": token})


def _call(client, method, path, **kw):
    if method == "POST":
        return client.post(path, json=UPDATE, **kw)
    return client.get(path, **kw)


def _login(client, user, password=PASSWORD, next_url="/"):
    page = client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    return client.post("/login", data={"username": user, "password": password, "csrf": token,
                                       "next": next_url})


@pytest.mark.parametrize("method,path", API_ROUTES)
def test_no_session_gets_401_on_every_route(app, method, path):
    res = _call(app.server.test_client(), method, path)
    assert res.status_code == 401, (path, res.status_code)
    assert res.json["login"] == "/login"
    assert "olga" not in res.text and "tina" not in res.text


@pytest.mark.parametrize("path", ["/", "/explore", "/ledger"])
def test_page_navigation_without_session_redirects_to_login(app, path):
    res = app.server.test_client().get(path, headers={"Accept": "text/html,*/*;q=0.8"})
    assert res.status_code == 302
    location = urlsplit(res.headers["Location"])
    assert location.path == "/login" and parse_qs(location.query)["next"] == [path]


@pytest.mark.parametrize("path", ["/_dash-layout", "/_dash-update-component", "/assets/style.css"])
def test_non_page_routes_never_redirect_even_for_browsers(app, path):
    res = app.server.test_client().get(path, headers={"Accept": "text/html"})
    assert res.status_code == 401


def test_login_then_every_route_opens_and_logout_closes_them(app):
    client = app.server.test_client()
    res = _login(client, "tina", next_url="/explore")
    assert res.status_code == 302 and res.headers["Location"] == "/explore"
    for method, path in API_ROUTES:
        if "component-suites" in path or path == "/_reload-hash":
            continue  # exact bundle names vary by version; they are covered by the 401 test
        assert _call(client, method, path).status_code == 200, path
    res = client.post("/_dash-update-component", json=UPDATE)
    # the identity comes from the session; the forged 'owner' is clamped to the granted role
    assert res.json["response"]["out"]["children"] == "tina:third_party:third_party"
    assert res.headers["Cache-Control"] == "no-store"
    assert logout(client).status_code == 302
    assert client.post("/_dash-update-component", json=UPDATE).status_code == 401


def test_owner_session_is_answered_as_owner(app):
    client = app.server.test_client()
    _login(client, "olga")
    res = client.post("/_dash-update-component", json=UPDATE)
    assert res.json["response"]["out"]["children"] == "olga:owner:owner"


@pytest.mark.parametrize("user,password", [("tina", "wrong password!!"), ("nobody", PASSWORD),
                                           ("", "")])
def test_bad_credentials_open_nothing(app, user, password):
    client = app.server.test_client()
    res = _login(client, user, password)
    assert res.status_code == 401 and "wrong password" in res.text
    assert client.get("/_dash-layout").status_code == 401


def test_login_requires_the_form_token(app):
    client = app.server.test_client()
    res = client.post("/login", data={"username": "tina", "password": PASSWORD})
    assert res.status_code == 400
    assert client.get("/_dash-layout").status_code == 401


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil.example",
                                    "javascript:alert(1)"])
def test_login_never_redirects_off_site(app, target):
    res = _login(app.server.test_client(), "tina", next_url=target)
    assert res.status_code == 302 and res.headers["Location"] == "/"


def test_forged_or_foreign_session_cookie_is_rejected(app, users_file):
    client = app.server.test_client()
    client.set_cookie("cohort_session", "eyJfdXNlcl9pZCI6Im9sZ2EifQ.forged.sig")
    assert client.get("/_dash-layout").status_code == 401
    # a cookie signed with another key does not open this server either
    other = app.server.test_client()
    _login(other, "olga")
    cookie = other.get_cookie("cohort_session").value
    app.server.secret_key = "another-secret-" + "z" * 32
    intruder = app.server.test_client()
    intruder.set_cookie("cohort_session", cookie)
    assert intruder.get("/_dash-layout").status_code == 401


def test_removed_user_or_changed_password_ends_the_session(app, users_file):
    tina, olga = app.server.test_client(), app.server.test_client()
    _login(tina, "tina")
    _login(olga, "olga")
    assert tina.get("/_dash-layout").status_code == 200
    remove_user(users_file, "tina")
    assert tina.get("/_dash-layout").status_code == 401
    add_user(users_file, "olga", "owner", "a brand new password", replace=True)
    assert olga.get("/_dash-layout").status_code == 401


def test_repeated_failures_are_throttled_then_released(app, monkeypatch):
    import services.identity.throttle as throttle

    clock = [1_000_000.0]
    monkeypatch.setattr(throttle, "clock", lambda: clock[0])
    client = app.server.test_client()
    codes = [_login(client, "tina", "wrong password!!").status_code for _ in range(4)]
    assert codes == [401, 401, 401, 429]  # LOGIN_MAX_FAILURES=3
    res = _login(client, "tina")
    assert res.status_code == 429 and int(res.headers["Retry-After"]) == 30  # a wait, ...
    clock[0] += 31
    assert _login(client, "tina").status_code == 302  # ... never a lock-out


def test_the_real_app_is_closed_without_a_session(users_file, tmp_path):
    from app import create_app

    real = create_app({"data_dir": tmp_path / "var", "users_file": users_file,
                       "secret_key": SECRET})
    client = real.server.test_client()
    for method, path in [("GET", "/_dash-layout"), ("GET", "/_dash-dependencies"),
                         ("POST", "/_dash-update-component"), ("GET", "/assets/app.css"),
                         ("GET", "/"), ("GET", "/ledger")]:
        assert _call(client, method, path).status_code == 401, path
    _login(client, "tina")
    assert client.get("/_dash-layout").status_code == 200
    assert client.get("/assets/app.css").status_code == 200
