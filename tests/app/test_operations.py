"""Day-2 operations: the CLI acts on the server's store only and keeps the users file readable
by the service; /healthz answers without a session and says nothing else; sign-ins and
sign-outs are logged without secrets in the documented format; Dash's set-up is finished before
the first requests race it; the app starts without the optional scikit-learn."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import flask
import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from services import cli
from services.config import AppConfig
from services.identity.users import UsersFileError, add_user, load_users
from services.ledger.models import SCHEMA_VERSION
from services.ops import logs, preflight
from services.ops.envfile import read_env_file

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "a long enough password"
SECRET = "operations-secret-" + "k" * 30
SERVICE_UID = SERVICE_GID = 4242     # no such account needed: a uid other than root's


@pytest.fixture
def clean_env(monkeypatch):
    """No configuration in the environment, as on a fresh shell."""
    for name in list(os.environ):
        if name.startswith("COHORT_") or name in ("DATABASE_URL", "SECRET_KEY"):
            monkeypatch.delenv(name)


@pytest.fixture
def server(tmp_path, clean_env):
    """A users-mode app on a SQLite ledger, and the env file that describes it."""
    from app import create_app

    users = tmp_path / "etc" / "users.json"
    users.parent.mkdir()
    for name, role in [("olga", "owner"), ("tina", "third_party")]:
        add_user(users, name, role, PASSWORD)
    env_file = tmp_path / "etc" / "cohort.env"
    env_file.write_text(f"COHORT_USERS_FILE={users}\nSECRET_KEY={SECRET}\n"
                        f"DATABASE_URL=sqlite:///{tmp_path}/var/ledger.sqlite\n"
                        f"COHORT_DATA_DIR={tmp_path}/var\n")
    app = create_app(AppConfig.from_env(read_env_file(env_file)), seed=3)
    return app, env_file, users


def login(client, name: str) -> int:
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    return client.post("/login", data={"username": name, "password": PASSWORD, "csrf": token,
                                       "next": "/"}).status_code


# -- the CLI -------------------------------------------------------------------------------------

def test_the_cli_without_configuration_refuses_with_one_line(clean_env, capsys, tmp_path,
                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    opened = []   # no database may be opened, or created, by a refused command
    monkeypatch.setattr(cli, "IdentityDB", lambda *a, **k: opened.append(a))
    monkeypatch.setattr(cli, "_has_sessions_table", lambda *a: opened.append(a))
    for argv in (["revoke-sessions", "bob"], ["failed-logins"],
                 ["remove-user", "bob", "--users-file", str(tmp_path / "users.json")],
                 ["add-user", "bob", "--role", "owner", "--password-stdin"]):
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--env-file" in err and "nothing was changed" in err
    assert list(tmp_path.iterdir()) == [] and opened == []   # no users file, no database


def test_the_cli_acts_on_the_server_s_store_through_its_env_file(server, capsys):
    app, env_file, users = server
    tina = app.server.test_client()
    assert login(tina, "tina") == 302
    assert cli.main(["--env-file", str(env_file), "revoke-sessions", "tina"]) == 0
    out = capsys.readouterr().out
    assert f"Database: sqlite:///{env_file.parent.parent}/var/ledger.sqlite" in out
    assert "Ended 1 session(s) of 'tina'" in out
    assert tina.get("/_dash-layout").status_code == 401
    assert cli.main(["--env-file", str(env_file), "remove-user", "tina"]) == 0
    assert f"from {users} (owner root, mode 0600)" in capsys.readouterr().out


def test_the_cli_refuses_a_database_no_server_used(server, capsys, tmp_path):
    _, env_file, _ = server
    other = tmp_path / "other.env"
    other.write_text(env_file.read_text().replace("var/ledger.sqlite", "elsewhere.sqlite"))
    assert cli.main(["--env-file", str(other), "revoke-sessions", "tina"]) == 2
    assert "has no session tables" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere.sqlite").exists()
    broken = tmp_path / "broken.env"
    broken.write_text(env_file.read_text() + "COHORT_BUDGETS={collaborator: 5}\n")
    assert cli.main(["--env-file", str(broken), "failed-logins"]) == 2
    assert "broken.env, line 5" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_a_cli_run_as_root_keeps_the_users_file_readable_by_the_service(server, capsys,
                                                                        monkeypatch):
    """The service user owns users.json (0600); root adds a user, then the service reads it."""
    app, env_file, users = server
    shared = Path(tempfile.mkdtemp(prefix="cohort-users-"))
    try:
        os.chmod(shared, 0o755)
        path = shared / "users.json"
        path.write_bytes(users.read_bytes())
        os.chown(path, SERVICE_UID, SERVICE_GID)
        os.chmod(path, 0o600)
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert cli.main(["--env-file", str(env_file), "add-user", "carol", "--role",
                         "collaborator", "--users-file", str(path), "--password-stdin"]) == 0
        assert "(owner 4242, mode 0600)" in capsys.readouterr().out
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert cli.main(["--env-file", str(env_file), "add-user", "olga", "--role", "owner",
                         "--users-file", str(path), "--password-stdin", "--replace"]) == 0
        st = path.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4242, 4242, 0o600)
        # the service's own uid reads it (as the server re-reads it on every change)
        read = subprocess.run(["cat", str(path)], user=SERVICE_UID, group=SERVICE_GID,
                              capture_output=True, text=True)
        assert read.returncode == 0, read.stderr
        assert sorted(json.loads(read.stdout)["users"]) == ["carol", "olga", "tina"]
        assert not [p for p in shared.iterdir() if p.name.startswith(".users-")]
    finally:
        for p in shared.iterdir():
            p.unlink()
        shared.rmdir()


def test_another_non_root_user_may_not_rewrite_the_users_file(tmp_path, monkeypatch):
    path = tmp_path / "users.json"
    add_user(path, "olga", "owner", PASSWORD)
    monkeypatch.setattr(os, "geteuid", lambda: path.stat().st_uid + 1000)
    with pytest.raises(UsersFileError, match="run this command as its owner"):
        add_user(path, "carol", "collaborator", PASSWORD)
    assert set(load_users(path)) == {"olga"}


def test_a_new_users_file_made_by_root_belongs_to_its_directory_s_owner(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    folder = tmp_path / "etc-cohort"
    folder.mkdir(mode=0o700)
    os.chown(folder, SERVICE_UID, SERVICE_GID)
    add_user(folder / "users.json", "olga", "owner", PASSWORD)
    st = (folder / "users.json").stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (4242, 4242, 0o600)


# -- /healthz ------------------------------------------------------------------------------------

def test_healthz_answers_without_a_session_and_reveals_nothing_else(server):
    app, _, _ = server
    client = app.server.test_client()
    res = client.get("/healthz")
    assert res.status_code == 200 and res.headers["Cache-Control"] == "no-store"
    assert res.get_json() == {"status": "ok", "database": "ok", "schema_version": SCHEMA_VERSION}
    text = res.get_data(as_text=True).lower()
    for secret in ("pirads", "olga", "tina", "sqlite", "ledger", "var"):
        assert secret not in text
    assert "Set-Cookie" not in res.headers
    # the guard still closes everything else
    assert client.get("/_dash-layout").status_code == 401
    assert client.post("/healthz").status_code != 200


def test_healthz_says_unavailable_when_the_database_is_not_reachable(caplog):
    server = flask.Flask("health")
    engine = create_engine("postgresql+psycopg://cohort:s3cr3t@127.0.0.1:1/cohort",
                           poolclass=NullPool, connect_args={"connect_timeout": 5})
    from app import install_health

    install_health(server, lambda: preflight.health(engine))
    with caplog.at_level(logging.WARNING):
        res = server.test_client().get("/healthz")
    assert res.status_code == 503
    assert res.get_json() == {"status": "unavailable", "database": "unreachable",
                              "schema_version": None}
    assert "127.0.0.1" not in res.get_data(as_text=True)
    assert any("unreachable" in r.getMessage() for r in caplog.records)


# -- logs ----------------------------------------------------------------------------------------

def test_sign_ins_and_sign_outs_are_logged_without_secrets(server, caplog):
    app, _, _ = server
    client = app.server.test_client()
    with caplog.at_level(logging.INFO):
        assert login(client, "olga") == 302
        page = client.get("/login").get_data(as_text=True)
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        failed = client.post("/login", data={"username": "my-password-typed-here",
                                             "password": "wrong password!!", "csrf": token})
        assert failed.status_code == 401
        assert client.get("/_dash-layout").status_code == 200   # still olga's session
        token = _logout_token(client)   # the logout form's token, as the page sends it
        assert client.post("/logout", data={"csrf": token}).status_code == 302
    lines = [(r.levelname, r.name, r.getMessage()) for r in caplog.records
             if r.name.startswith(("services.identity", "callbacks.server"))]
    assert ("INFO", "callbacks.server.auth", "Signed in: olga (owner) from 127.0.0.1.") \
        in lines
    assert ("INFO", "callbacks.server.auth", "Signed out: olga from 127.0.0.1.") in lines
    assert ("WARNING", "services.identity.throttle",
            "Sign-in failed from 127.0.0.1: unknown user or wrong password.") in lines
    text = caplog.text
    assert PASSWORD not in text and "wrong password!!" not in text
    assert "my-password-typed-here" not in text and SECRET not in text


def _logout_token(client) -> str:
    from layouts import ids
    from tests.app.dash_http import callback_payload, find_hidden_input

    deps = client.get("/_dash-dependencies").get_json()
    body = callback_payload(deps, ids.SESSION_BADGE, {(ids.URL, "pathname"): "/"},
                            (ids.URL, "pathname"))
    badge = client.post("/_dash-update-component", json=body).get_json()
    return find_hidden_input(badge["response"][ids.SESSION_BADGE]["children"], "csrf")


def test_log_lines_carry_time_level_and_logger_in_text_and_json():
    record = logging.LogRecord("callbacks.server.auth", logging.INFO, __file__, 1,
                               "Signed in: %s", ("olga",), None)
    config = logs.logging_dict("text")["formatters"]["cohort"]
    text = logging.Formatter(config["format"], config["datefmt"]).format(record)
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} INFO "
                    r"callbacks\.server\.auth \[\d+\] Signed in: olga$", text)
    entry = json.loads(logs.JsonFormatter().format(record))
    assert entry["level"] == "INFO" and entry["logger"] == "callbacks.server.auth"
    assert entry["message"] == "Signed in: olga" and entry["time"].endswith("+00:00")
    assert logs.logging_dict("json")["formatters"]["cohort"]["()"].endswith("JsonFormatter")


# -- the first requests after a restart ----------------------------------------------------------

def test_concurrent_first_requests_for_the_component_bundles_all_succeed(tmp_path, clean_env):
    """Dash registered its libraries during the first request, after flagging that done: the
    other threads' first requests found none ("Registered libraries are: []", a 400)."""
    from app import create_app

    reference = create_app({"data_dir": tmp_path})
    client = reference.server.test_client()
    assert client.get("/").status_code == 200   # set up by now in any case
    urls = [url for url in (f"/_dash-component-suites/{package}/{path}"
                            for package, paths in sorted(reference.registered_paths.items())
                            for path in sorted(paths))
            if client.get(url).status_code == 200]   # one at a time (some .map files are absent)
    assert any("dash_table" in u for u in urls) and len(urls) >= 10
    for _ in range(3):
        assert _first_requests_at_once(create_app({"data_dir": tmp_path}), urls) == [200] * 24


def _first_requests_at_once(app, urls: list[str], n: int = 24) -> list[int]:
    """The statuses of ``n`` first requests released together, one thread each."""
    barrier = threading.Barrier(n)
    codes: list[int] = []

    def fetch(i: int) -> None:
        client = app.server.test_client()
        barrier.wait()
        codes.append(client.get(urls[i % len(urls)]).status_code)

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


# -- optional libraries ------------------------------------------------------------------------

def test_the_app_starts_without_scikit_learn_and_the_model_check_says_what_to_install(
        tmp_path):
    script = f"""
import sys
sys.modules["sklearn"] = None          # as if scikit-learn were not installed
import app
app.create_app({{"data_dir": {str(tmp_path)!r}}})
from dp_engine.errors import DPError
from services.studio.model_check import model_check
try:
    model_check(None, None, None, "Prostatitis", paired=True)   # refused before reading them
except DPError as exc:
    print("REFUSED", exc)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "REFUSED The model check needs scikit-learn" in done.stdout
    assert "pip install -e '.[studio]'" in done.stdout
