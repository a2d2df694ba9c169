"""Users file, CLI, bind check and embedded mode (one local owner, loopback only)."""

from __future__ import annotations

import io
import json
import stat

import flask
import pytest

from callbacks.server.auth import current_identity, init_auth
from services import cli
from services.identity.roles import Role
from services.identity.session import (
    ANONYMOUS,
    LOCAL_OWNER,
    AuthConfigError,
    Identity,
    assert_bind_allowed,
    is_loopback,
)
from services.identity.users import UsersFileError, UserStore, add_user, load_users, remove_user

PASSWORD = "correct horse battery"


def test_add_user_hashes_the_password_and_writes_a_private_file(tmp_path):
    path = tmp_path / "conf" / "users.json"
    add_user(path, "alice", Role.COLLABORATOR, PASSWORD)
    add_user(path, "bob", "third_party", PASSWORD)
    raw = path.read_text()
    assert PASSWORD not in raw
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    users = load_users(path)
    assert users["alice"].role is Role.COLLABORATOR and users["bob"].role is Role.THIRD_PARTY
    assert users["alice"].password_hash != users["bob"].password_hash  # salted
    store = UserStore(path)
    assert store.verify("alice", PASSWORD).name == "alice"
    assert store.verify("alice", PASSWORD + "x") is None
    assert store.verify("nobody", PASSWORD) is None


@pytest.mark.parametrize("name,role,password", [
    ("../etc", "owner", PASSWORD), ("", "owner", PASSWORD), ("a b", "owner", PASSWORD),
    ("alice", "admin", PASSWORD), ("alice", "owner", "short"),
])
def test_add_user_refuses_bad_input(tmp_path, name, role, password):
    with pytest.raises(UsersFileError):
        add_user(tmp_path / "u.json", name, role, password)
    assert not (tmp_path / "u.json").exists()


def test_existing_user_needs_replace_and_store_sees_changes(tmp_path):
    path = tmp_path / "u.json"
    add_user(path, "alice", "collaborator", PASSWORD)
    store = UserStore(path)
    with pytest.raises(UsersFileError, match="already exists"):
        add_user(path, "alice", "owner", PASSWORD)
    add_user(path, "alice", "third_party", "another password", replace=True)
    assert store.get("alice").role is Role.THIRD_PARTY
    assert store.verify("alice", PASSWORD) is None
    remove_user(path, "alice")
    assert store.get("alice") is None
    path.write_text("{not json")
    assert store.get("alice") is None  # a broken file logs nobody in


def test_load_users_reports_malformed_files(tmp_path):
    path = tmp_path / "u.json"
    with pytest.raises(UsersFileError, match="add-user"):
        load_users(path)
    path.write_text(json.dumps({"users": {"alice": {"role": "boss", "password_hash": "x"}}}))
    with pytest.raises(UsersFileError, match="needs a role"):
        load_users(path)


def test_cli_add_and_remove_user(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COHORT_DATA_DIR", str(tmp_path / "var"))  # the session tables
    monkeypatch.delenv("DATABASE_URL", raising=False)
    path = tmp_path / "users.json"
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert cli.main(["add-user", "carol", "--role", "owner", "--users-file", str(path),
                     "--password-stdin"]) == 0
    assert "Saved user 'carol' (owner)" in capsys.readouterr().out
    assert UserStore(path).verify("carol", PASSWORD).role is Role.OWNER
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert cli.main(["add-user", "dave", "--role", "owner", "--users-file", str(path),
                     "--password-stdin"]) == 2
    assert "at least" in capsys.readouterr().err
    assert cli.main(["remove-user", "carol", "--users-file", str(path)]) == 0
    assert load_users(path) == {}


def test_cli_serve_refuses_public_host_without_users(monkeypatch, capsys):
    monkeypatch.delenv("COHORT_USERS_FILE", raising=False)
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "Refusing to listen on '0.0.0.0'" in err and "add-user" in err


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "localhost", "::1", "[::1]",
                                  "::ffff:127.0.0.1"])
def test_loopback_hosts(host):
    assert is_loopback(host)
    assert_bind_allowed(host, {})


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "10.0.0.5", "192.168.1.2", "example.org",
                                  "localhost.evil.com"])
def test_public_hosts_are_refused_in_embedded_mode(host):
    assert not is_loopback(host)
    with pytest.raises(AuthConfigError, match="COHORT_USERS_FILE"):
        assert_bind_allowed(host, {"USERS_FILE": None})
    assert_bind_allowed(host, {"USERS_FILE": "/etc/cohort/users.json"})


def _embedded_app() -> flask.Flask:
    server = flask.Flask("embedded")
    init_auth(server, {})

    @server.route("/who")
    def who():
        ident = current_identity()
        return {"user": ident.user, "role": ident.role.value, "ok": ident.authenticated}

    return server


def test_embedded_mode_serves_loopback_as_the_local_owner():
    client = _embedded_app().test_client()
    for addr in ("127.0.0.1", "::1"):
        res = client.get("/who", environ_base={"REMOTE_ADDR": addr})
        assert res.status_code == 200
        assert res.json == {"user": "local-owner", "role": "owner", "ok": True}
    assert res.headers["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize("environ,headers", [
    ({"REMOTE_ADDR": "10.1.2.3"}, {}),
    ({"REMOTE_ADDR": "192.168.0.9"}, {}),
    ({"REMOTE_ADDR": "127.0.0.1"}, {"X-Forwarded-For": "203.0.113.7"}),  # behind a proxy
    ({"REMOTE_ADDR": "127.0.0.1"}, {"Forwarded": "for=203.0.113.7"}),
    ({"REMOTE_ADDR": "127.0.0.1"}, {"Host": "attacker.example:8050"}),  # DNS rebinding
])
def test_embedded_mode_refuses_anything_not_local(environ, headers):
    client = _embedded_app().test_client()
    for path in ("/who", "/_dash-update-component", "/assets/x.css"):
        res = client.get(path, environ_base=environ, headers=headers)
        assert res.status_code == 403
        assert "embedded mode" in res.text and "add-user" in res.text


def test_identity_outside_a_request_is_anonymous():
    assert current_identity() == ANONYMOUS and not ANONYMOUS.authenticated
    assert Identity("local-owner", Role.OWNER, True) == LOCAL_OWNER


def test_users_mode_refuses_to_start_without_secret_or_users(tmp_path, monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    path = tmp_path / "users.json"
    add_user(path, "alice", "owner", PASSWORD)
    with pytest.raises(AuthConfigError, match="SECRET_KEY"):
        init_auth(flask.Flask("a"), {"USERS_FILE": str(path)})
    with pytest.raises(AuthConfigError, match="SECRET_KEY"):
        init_auth(flask.Flask("b"), {"USERS_FILE": str(path), "SECRET_KEY": "short"})
    monkeypatch.setenv("SECRET_KEY", "from-the-environment-" + "e" * 20)
    server = flask.Flask("env")
    init_auth(server, {"USERS_FILE": str(path)})
    assert server.secret_key.startswith("from-the-environment-")
    monkeypatch.delenv("SECRET_KEY")
    with pytest.raises(AuthConfigError, match="does not exist"):
        init_auth(flask.Flask("c"), {"USERS_FILE": str(tmp_path / "none.json"),
                                     "SECRET_KEY": "x" * 32})
    remove_user(path, "alice")
    with pytest.raises(AuthConfigError, match="no users"):
        init_auth(flask.Flask("d"), {"USERS_FILE": str(path), "SECRET_KEY": "x" * 32})
