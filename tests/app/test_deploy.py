"""Deploy as written: README "Production serving" run in a temporary directory, then the shipped
nginx site and systemd unit checked by the tools of Debian 12.

The bash block of the README is executed line by line, with the machine's paths moved under a
temporary directory (``/opt/cohort-explorer``, ``/etc/cohort``, ``/var/lib/cohort``) and the
test's own user instead of ``cohort``. Three lines are not run as written, each for a stated
reason (``NOT_RUN``): creating the service user, cloning (this checkout is copied), enabling the
systemd unit (no systemd here: the by-hand line starts the same command). The PostgreSQL line is
replaced by the same statements on ``TEST_DATABASE_URL`` with a role and database of the test's
own. Then: the documented extras install into a fresh venv, the server starts with
``docs/deploy/gunicorn.conf.py`` and the env file (sourced by bash), a collaborator signs in and
releases an Explore view over HTTP, ``kill -HUP`` replaces the workers, a restart keeps sessions
and budgets, and the backup and restore of docs/operations.md bring the budgets back. Under
CI=true nothing here is skipped: .ci/run installs nginx and systemd's tools.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from tests.app import explore_client
from tests.app.gunicorn_app import Client, free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy"
OPERATIONS = ROOT / "docs" / "operations.md"
CI = bool(os.environ.get("CI"))
PG_URL = os.environ.get("TEST_DATABASE_URL")
PASSWORD = "deployed as written 2026"
NOT_RUN = {
    "useradd ": "the service user: every step runs as the test's own user",
    "git clone ": "the checkout: the test copies this one",
    "install -m 0644 docs/deploy/cohort-explorer.service": "no systemd here: the by-hand line "
                                                           "below runs the unit's ExecStart",
}
SERVER_LINE = "runuser -u cohort -- bash -c 'set -a;"
PSQL_LINE = "runuser -u postgres -- psql"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} (INFO|WARNING|ERROR) \S+ \[\d+\] ")
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "var", "__pycache__", ".pytest_cache",
                                     ".ruff_cache", "*.png", "tests", "bench", "*.egg-info")


def need(ok: bool, why: str) -> None:
    """Skip outside CI; under CI a missing tool is a failure (.ci/run must install it)."""
    if ok:
        return
    if CI:
        pytest.fail(f"CI=true but {why}: .ci/run must provide it")
    pytest.skip(why)


def production_block() -> list[str]:
    """The command lines of README "Production serving" (its first bash block)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Production serving"):]
    block = section[section.index("```bash\n") + 8:]
    block = block[:block.index("```")]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


# -- the deployment --------------------------------------------------------------------------

@dataclass
class Deployment:
    tmp: Path
    app: Path
    etc: Path
    var: Path
    env: dict[str, str]
    server_command: str
    database_url: str        # the app's (role with a password)
    admin_database_url: str  # libpq URL of the test database as superuser
    log: Path
    proc: subprocess.Popen | None = None
    port: int = 0
    readme_output: str = ""

    # -- what the README does, adapted to the temporary directory --
    def adapt(self, line: str) -> str:
        for old, new in [("/opt/cohort-explorer", str(self.app)), ("/etc/cohort", str(self.etc)),
                         ("/var/lib/cohort", str(self.var)), ("runuser -u cohort -- ", ""),
                         ("-o cohort -g cohort ", "")]:
            line = line.replace(old, new)
        if " add-user " in line:  # the README prompts for the password; the test types it
            line += ' --password-stdin <<<"$OWNER_PASSWORD"'
        return line

    def cli(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run([str(self.app / ".venv/bin/cohort-explorer"), "--env-file",
                               str(self.etc / "cohort.env"), *args], input=stdin, text=True,
                              capture_output=True, cwd=self.app, env=self.env, timeout=300)

    # -- the server --
    def start(self, command: str | None = None) -> None:
        self.port = self.port or free_port()
        env = {**self.env, "GUNICORN_CMD_ARGS": f"--bind 127.0.0.1:{self.port}"}
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(["bash", "-c", command or self.server_command],
                                         cwd=self.app, env=env, stdout=out, stderr=out,
                                         start_new_session=True)

    def wait_healthy(self) -> dict[str, Any]:
        for _ in range(600):  # bounded polls, not a timing assertion
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited ({self.proc.returncode}):\n"
                                     f"{self.log.read_text()[-4000:]}")
            try:
                reply = Client(Endpoint(self.port)).request("GET", "/healthz")
                if reply.status == 200:
                    return json.loads(reply.body)
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"the server never answered:\n{self.log.read_text()[-4000:]}")

    def master(self) -> int:
        """gunicorn's master: the started process itself once bash has exec'd into it."""
        import psutil

        proc = psutil.Process(self.proc.pid)
        if _is_gunicorn(proc):
            return proc.pid
        return next(c.pid for c in proc.children() if _is_gunicorn(c))

    def workers(self) -> set[int]:
        import psutil

        return {c.pid for c in psutil.Process(self.master()).children() if _is_gunicorn(c)}

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        os.kill(self.master(), signal.SIGTERM)
        try:
            return self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group this test started
            self.proc.wait()
            raise AssertionError("gunicorn did not stop within 90 s of SIGTERM") from None

    # -- the ledger, read directly --
    def spent(self, role: str = "collaborator") -> float:
        engine = sa.create_engine(self.database_url, poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                return float(conn.execute(sa.text(
                    "SELECT coalesce(sum(spent), 0) FROM ledger_budgets WHERE role = :r"),
                    {"r": role}).scalar_one())
        finally:
            engine.dispose()


def _is_gunicorn(proc: Any) -> bool:
    """A live gunicorn process (an exiting worker is a zombie for a moment: not counted)."""
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE and "gunicorn" in " ".join(proc.cmdline())
    except psutil.Error:
        return False


@dataclass
class Endpoint:
    """What ``Client`` needs of a server: its port (the worker pid is not tracked here)."""

    port: int

    def worker_of(self, probe: str) -> None:
        return None


class FlaskLike:
    """``explore_client`` drives a Flask test client; this gives it a real HTTP one."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def post(self, path: str, json: dict) -> Any:
        assert path == "/_dash-update-component"
        reply = self.client.post_json(json)

        class Response:
            status_code = reply.status

            @staticmethod
            def get_data(as_text: bool = False) -> str:
                return reply.text

        return Response()


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _psql_helper(tmp: Path, admin: str, role: str, db: str, env_file: Path,
                 paths: dict[str, str]) -> Path:
    """Stands in for the README's ``psql`` line: the same two statements on the test server
    (a role of the test's own, with the password the README generated), and the env file's
    DATABASE_URL pointed at them; the password placeholder stays for the README's ``sed``."""
    parsed = make_url(admin)
    url = (f"postgresql+psycopg://{role}:CHANGE-ME@{parsed.host or '127.0.0.1'}:"
           f"{parsed.port or 5432}/{db}")
    helper = tmp / "psql_as_in_readme.py"
    helper.write_text(textwrap.dedent(f"""\
        import re, sys
        import psycopg
        password = sys.argv[1]
        assert re.fullmatch(r"[0-9a-f]{{48}}", password), "openssl rand -hex 24 expected"
        with psycopg.connect({_libpq(admin)!r}, autocommit=True) as conn:
            conn.execute("CREATE ROLE {role} LOGIN PASSWORD '" + password + "'")
            conn.execute("CREATE DATABASE {db} OWNER {role}")
        path = {str(env_file)!r}
        text = open(path).read()
        text = re.sub(r"(?m)^DATABASE_URL=.*$", "DATABASE_URL=" + {url!r}, text)
        for old, new in {paths!r}.items():
            text = text.replace(old, new)
        open(path, "w").write(text)
        """))
    return helper


def _drop(admin: str, role: str, db: str) -> None:
    engine = sa.create_engine(make_url(admin).set(database="postgres"),
                              isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
            conn.execute(sa.text(f'DROP ROLE IF EXISTS "{role}"'))
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    need(bool(PG_URL), "TEST_DATABASE_URL (a PostgreSQL superuser URL) is not set")
    need(subprocess.run(["/usr/bin/python3", "-c", "import ensurepip"]).returncode == 0
         if Path("/usr/bin/python3").exists() else False,
         "Debian's /usr/bin/python3 with venv (python3-venv) is not installed")
    tmp = tmp_path_factory.mktemp("deploy")
    app, etc, var = tmp / "opt/cohort-explorer", tmp / "etc/cohort", tmp / "var/lib/cohort"
    shutil.copytree(ROOT, app, ignore=COPY_IGNORE)
    tag = uuid.uuid4().hex[:10]
    role, db = f"cohort_deploy_{tag}", f"cohort_deploy_{tag}"
    admin = make_url(PG_URL).set(database="postgres").render_as_string(hide_password=False)
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("COHORT_", "GUNICORN_")) or k in (
               "DATABASE_URL", "SECRET_KEY", "HOST", "PORT", "DASH_DEBUG", "PYTHONPATH",
               "VIRTUAL_ENV"))}
    env["OWNER_PASSWORD"] = PASSWORD
    lines = production_block()
    server = [line for line in lines if line.startswith(SERVER_LINE)]
    assert len(server) == 1, "README: one by-hand gunicorn line"
    paths = {"/etc/cohort": str(etc), "/var/lib/cohort": str(var)}
    helper = _psql_helper(tmp, admin, role, db, etc / "cohort.env", paths)
    dep = Deployment(tmp, app, etc, var, env, "", "", _libpq(admin), tmp / "server.log")
    script = ["set -euo pipefail", f"cd {app}"]
    for line in lines:
        if line is server[0] or any(line.startswith(p) for p in NOT_RUN):
            continue
        if line.startswith(PSQL_LINE):
            script.append(f'{sys.executable} {helper} "$DBPASS"')
        else:
            script.append(dep.adapt(line))
    dep.server_command = dep.adapt(server[0])
    try:
        started = time.monotonic()  # reported with -s, never asserted
        done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=app, env=env, text=True,
                              capture_output=True, timeout=1500)
        print(f"README steps (venv and install included): {time.monotonic() - started:.0f} s")
        assert done.returncode == 0, f"README steps failed:\n{done.stdout[-3000:]}\n" \
                                     f"{done.stderr[-3000:]}"
        dep.readme_output = done.stdout
        dep.database_url = read_env(etc / "cohort.env")["DATABASE_URL"]
        yield dep
    finally:
        dep.stop()
        _drop(admin, role, db)


def read_env(path: Path) -> dict[str, str]:
    from services.ops.envfile import read_env_file

    return read_env_file(path)


# -- the tests ---------------------------------------------------------------------------------

def test_the_readme_steps_install_configure_and_check(deployment):
    dep = deployment
    out = dep.readme_output
    # add-user as the README writes it; the CLI says where it wrote and keeps the file private
    assert re.search(r"Saved user 'alice' \(owner\) in \S+/etc/cohort/users\.json "
                     r"\(owner \S+, mode 0600\)", out)
    assert "Configuration OK. Database: postgresql+psycopg://cohort_deploy_" in out
    assert "***@" in out and read_env(dep.etc / "cohort.env")["SECRET_KEY"] not in out
    env = read_env(dep.etc / "cohort.env")
    assert len(env["SECRET_KEY"]) == 64 and "CHANGE-ME" not in env["DATABASE_URL"]
    # the documented install is the runtime and PostgreSQL: the studio's heavy extra (jax, mbi,
    # OpenDP, scikit-learn) is opt-in, and nothing of the tests comes along
    listed = subprocess.run([str(dep.app / ".venv/bin/python"), "-m", "pip", "list",
                             "--format=json"], capture_output=True, text=True, check=True)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"psycopg", "gunicorn", "dash"} <= names
    assert not {"pytest", "pyspark", "selenium", "hypothesis", "jax", "mbi", "opendp"} & names


def test_the_server_starts_serves_a_release_reloads_and_restarts_with_budgets_intact(
        deployment):
    dep = deployment
    # an administrator sets the budgets: single-quoted JSON survives bash's sourcing
    env_file = dep.etc / "cohort.env"
    env_file.write_text(re.sub(r'"collaborator": [\d.]+', '"collaborator": 6',
                               env_file.read_text(), count=1))
    added = dep.cli("add-user", "carol", "--role", "collaborator", "--password-stdin",
                    stdin=PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
    dep.start()
    health = dep.wait_healthy()
    assert health == {"status": "ok", "database": "ok", "schema_version": health["schema_version"]}
    assert isinstance(health["schema_version"], int)

    carol = Client(Endpoint(dep.port))
    assert carol.login("carol", PASSWORD).status == 302
    first = explore_client.render(FlaskLike(carol), role="collaborator")
    assert first.status == 200 and first.figures(), first.text[:500]
    assert re.search(r"ε [\d.]+ of 6 used", first.panel_text), first.panel_text[:600]
    spent = dep.spent()
    assert spent > 0

    # reload (systemctl reload = kill -HUP): new workers, the session still valid
    before = dep.workers()
    os.kill(dep.master(), signal.SIGHUP)
    for _ in range(600):
        now = dep.workers()
        if now and not now & before:
            break
        time.sleep(0.2)
    assert now and not now & before, "kill -HUP did not replace the workers"
    dep.wait_healthy()
    assert carol.request("GET", "/_dash-layout").status == 200

    # restart: sessions and budgets live in PostgreSQL
    assert dep.stop() == 0
    dep.start()
    dep.wait_healthy()
    assert carol.request("GET", "/_dash-layout").status == 200
    again = explore_client.render(FlaskLike(carol), role="collaborator")
    assert again.status == 200 and again.figures()
    assert dep.spent() == pytest.approx(spent)  # served again free

    log = dep.log.read_text()
    assert "Traceback" not in log
    signed_in = [line for line in log.splitlines() if "Signed in: carol (collaborator)" in line]
    assert signed_in and all(LOG_LINE.match(line) for line in signed_in)
    assert PASSWORD not in log
    assert any(LOG_LINE.match(line) and "gunicorn.access" in line and "/healthz" in line
               for line in log.splitlines())


def test_the_backup_of_operations_md_restores_the_budgets(deployment):
    dep = deployment
    if dep.proc is None or dep.proc.poll() is not None:
        dep.start()
    dep.wait_healthy()
    guide = OPERATIONS.read_text(encoding="utf-8")
    for command in ("pg_dump --format=custom", "pg_restore --clean --if-exists",
                    "tar -C / -czf", "tar -C / -xzf"):
        assert command in guide, f"docs/operations.md no longer shows {command!r}"
    backup = dep.tmp / "backup"
    backup.mkdir()
    spent = dep.spent()
    subprocess.run(["pg_dump", "--format=custom", f"--file={backup / 'ledger.dump'}",
                    f"--dbname={dep.admin_database_url.rsplit('/', 1)[0]}/"
                    f"{make_url(dep.database_url).database}"], check=True, timeout=300)
    files = [str(p.relative_to("/")) for p in (dep.etc, dep.var)]
    subprocess.run(["tar", "-C", "/", "-czf", str(backup / "files.tar.gz"), *files], check=True)

    carol = Client(Endpoint(dep.port))
    assert carol.login("carol", PASSWORD).status == 302
    more = explore_client.render(FlaskLike(carol), role="collaborator", view="mean")
    assert more.status == 200 and dep.spent() > spent   # spent after the backup
    assert dep.stop() == 0
    shutil.rmtree(dep.var)
    (dep.etc / "users.json").unlink()                    # and the files lost

    subprocess.run(["pg_restore", "--clean", "--if-exists",
                    f"--dbname={dep.admin_database_url.rsplit('/', 1)[0]}/"
                    f"{make_url(dep.database_url).database}", str(backup / "ledger.dump")],
                   check=True, timeout=300)
    subprocess.run(["tar", "-C", "/", "-xzf", str(backup / "files.tar.gz")], check=True)
    dep.start()
    dep.wait_healthy()
    assert dep.spent() == pytest.approx(spent)
    restored = Client(Endpoint(dep.port))
    assert restored.login("carol", PASSWORD).status == 302
    assert dep.stop() == 0


def test_a_wrong_setting_stops_the_deployed_server_with_one_line(deployment):
    """The issue's env file line: unquoted JSON, whose quotes bash removes."""
    dep = deployment
    assert dep.stop() in (0, None)
    broken = dep.etc / "broken.env"
    text = (dep.etc / "cohort.env").read_text()
    broken.write_text(re.sub(r"(?m)^COHORT_BUDGETS=.*$",
                             'COHORT_BUDGETS={"collaborator":5,"third_party":1}', text))
    log_before = dep.log.read_text()
    dep.start(dep.server_command.replace("cohort.env", "broken.env"))
    assert dep.proc.wait(timeout=120) == 78
    new = dep.log.read_text()[len(log_before):]
    errors = [line for line in new.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "COHORT_BUDGETS" in errors[0] and "single quotes" in errors[0]
    assert "Traceback" not in new and "Booting worker" not in new
    # the CLI reads env files strictly: the same line is refused with its number
    refused = subprocess.run([str(dep.app / ".venv/bin/cohort-explorer"), "--env-file",
                              str(broken), "check"], capture_output=True, text=True,
                             env=dep.env, cwd=dep.app)
    assert refused.returncode == 2 and "single quotes" in refused.stderr
    assert re.search(r"broken\.env, line \d+", refused.stderr)


# -- the shipped nginx site and systemd unit -------------------------------------------------

def test_the_nginx_site_passes_nginx_t(tmp_path):
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists()
                                      else None)
    need(nginx is not None, "nginx is not installed (apt-get install nginx)")
    need(shutil.which("openssl") is not None, "openssl is not installed")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=cohort.hospital.example", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "cert.pem")], check=True, capture_output=True)
    site = (DEPLOY / "nginx.conf").read_text()
    assert "/etc/ssl/cohort/fullchain.pem" in site and "/etc/ssl/cohort/privkey.pem" in site
    site = site.replace("/etc/ssl/cohort/fullchain.pem", str(tmp_path / "cert.pem"))
    site = site.replace("/etc/ssl/cohort/privkey.pem", str(tmp_path / "key.pem"))
    (tmp_path / "cohort.conf").write_text(site)
    (tmp_path / "nginx.conf").write_text(textwrap.dedent(f"""\
        # the stock Debian nginx.conf reduced to what `nginx -t` needs; the site as shipped
        pid {tmp_path}/nginx.pid;
        error_log stderr;
        events {{ worker_connections 768; }}
        http {{
            include /etc/nginx/mime.types;
            access_log off;
            include {tmp_path}/cohort.conf;
        }}
        """))
    done = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr
    version = subprocess.run([nginx, "-v"], capture_output=True, text=True).stderr
    assert "nginx/" in version


def test_the_systemd_unit_verifies_and_every_prerequisite_is_a_documented_step(tmp_path):
    analyze = shutil.which("systemd-analyze")
    need(analyze is not None, "systemd-analyze is not installed (apt-get install systemd)")
    unit = (DEPLOY / "cohort-explorer.service").read_text()
    assert "ExecReload=/bin/kill -HUP $MAINPID" in unit and "RestartPreventExitStatus=78" in unit
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent))
    local = tmp_path / "cohort-explorer.service"
    local.write_text(unit.replace("/opt/cohort-explorer/.venv/bin/gunicorn", str(gunicorn)))
    done = subprocess.run([analyze, "verify", str(local)], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    guide = OPERATIONS.read_text(encoding="utf-8")
    install = guide[guide.index("## Install"):guide.index("## Configure")]
    needed = ["useradd --system", "/opt/cohort-explorer/.venv/bin/gunicorn",
              "/etc/cohort/cohort.env", "/etc/cohort/gunicorn.conf.py", "/var/lib/cohort",
              "CREATE ROLE cohort LOGIN PASSWORD", "CREATE DATABASE cohort OWNER cohort",
              "/etc/systemd/system/"]
    for fact in needed:
        assert fact in install, f"docs/operations.md (Install) does not show {fact!r}"
    for path in re.findall(r"(/(?:opt|etc|var)/[\w./-]+)", unit):
        assert path in guide, f"the unit names {path}, which docs/operations.md never sets up"
