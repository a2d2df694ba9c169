"""Configuration checked at start: every setting parsed once, one line naming the variable;
the env file read alike by bash and by the CLI; the start-up checks of files and database;
gunicorn's master refusing a wrong configuration with one line before any worker starts."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from services.config import SETTINGS, AppConfig, ConfigError
from services.identity.users import add_user
from services.ops import preflight
from services.ops.envfile import EnvFileError, parse_env_text, read_env_file

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy"
SECRET = "a-secret-key-for-tests-" + "s" * 20
PASSWORD = "a long enough password"
GUNICORN = shutil.which("gunicorn", path=str(Path(sys.executable).parent))


@pytest.fixture
def users(tmp_path) -> Path:
    path = tmp_path / "users.json"
    add_user(path, "olga", "owner", PASSWORD)
    return path


# -- every setting, one line naming it -----------------------------------------------------------

BAD = [
    ("COHORT_BUDGETS", "{collaborator: 5}"),                 # quotes removed by bash
    ("COHORT_BUDGETS", '{"collaborator": -1}'),
    ("COHORT_BUDGETS", '{"colaborator": 5}'),
    ("COHORT_BUDGETS", "[5]"),
    ("COHORT_BUDGET_RENEWAL_DAYS", "0"),
    ("COHORT_BUDGET_RENEWAL_DAYS", "monthly"),
    ("COHORT_MAX_UPLOAD_MB", "fifty"),
    ("COHORT_MAX_REQUEST_KB", "0"),
    ("COHORT_SESSION_IDLE_MINUTES", "-5"),
    ("COHORT_SESSION_MAX_HOURS", "nan"),
    ("COHORT_COOKIE_SECURE", "maybe"),
    ("COHORT_COOKIE_SAMESITE", "lax-ish"),
    ("COHORT_PROXY_COUNT", "1.5"),
    ("COHORT_HSTS_SECONDS", "-1"),
    ("COHORT_LOGIN_MAX_FAILURES", "0"),
    ("COHORT_LOGIN_CLIENT_MAX_FAILURES", "x"),
    ("COHORT_LOGIN_BACKOFF_SECONDS", "0"),
    ("COHORT_LOGIN_BACKOFF_MAX_SECONDS", "1"),              # below the first wait (30)
    ("COHORT_LARGE_FILE_MB", "-1"),
    ("COHORT_DUCKDB_MEMORY", "lots"),
    ("COHORT_RUNNER_PROCESSES", "some"),
    ("COHORT_RUNNER_PROCESSES", "-1"),
    ("COHORT_RUNNER_PROCESSES", "1.5"),
    ("COHORT_LOG_FORMAT", "xml"),
    ("PORT", "http"),
    ("PORT", "0"),
    ("DASH_DEBUG", "verbose"),
    ("DATABASE_URL", "mysql://cohort@db/cohort"),
    ("DATABASE_URL", "not a url"),
    ("DATABASE_URL", ""),                                    # empty while users are configured
    ("SECRET_KEY", "short"),
    ("SECRET_KEY", ""),
]


@pytest.mark.parametrize("variable,value", BAD)
def test_a_wrong_setting_is_named_in_one_line(users, variable, value):
    env = {"COHORT_USERS_FILE": str(users), "SECRET_KEY": SECRET, variable: value}
    with pytest.raises(ConfigError) as caught:
        AppConfig.from_env(env)
    assert caught.value.variable == variable
    message = str(caught.value)
    assert message.startswith(f"{variable}: ") and "\n" not in message
    assert len(message) > len(variable) + 30   # and says what is wrong and what to do


def test_every_setting_is_read_and_documented():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    configuration = readme[readme.index("## Configuration"):readme.index("## Production")]
    for name in SETTINGS:
        assert f"`{name}`" in configuration, f"README Configuration does not list {name}"
    read = (ROOT / "services" / "config.py").read_text()
    for name in SETTINGS:
        assert f'"{name}"' in read


def test_the_issue_s_budgets_line_names_itself_and_says_how_to_quote_it(users):
    """What bash makes of COHORT_BUDGETS={"collaborator":5,"third_party":1}."""
    loaded = _bash_env('COHORT_BUDGETS={"collaborator":5,"third_party":1}\n')
    assert loaded["COHORT_BUDGETS"] == "{collaborator:5,third_party:1}"
    with pytest.raises(ConfigError, match=r"^COHORT_BUDGETS: .*single quotes"):
        AppConfig.from_env(loaded)


def test_the_valid_forms_parse():
    cfg = AppConfig.from_env({
        "COHORT_BUDGETS": '{"collaborator": 4, "per_user": {"collaborator": 2}}',
        "COHORT_BUDGET_RENEWAL_DAYS": "30", "COHORT_COOKIE_SAMESITE": "strict",
        "COHORT_RUNNER_PROCESSES": "2", "COHORT_LOG_FORMAT": "JSON", "PORT": "9000",
        "COHORT_DUCKDB_MEMORY": "2GB", "COHORT_MAX_UPLOAD_MB": "12.5"})
    assert cfg.budgets["collaborator"] == 4 and cfg.renewal_days == 30
    assert cfg.cookie_samesite == "Strict" and cfg.runner_processes == 2
    assert cfg.log_format == "json"
    assert cfg.port == 9000 and cfg.max_upload_bytes == 12_500_000
    # unset or blank: the embedded defaults; an unset DATABASE_URL keeps SQLite in the data dir
    default = AppConfig.from_env({"COHORT_MAX_UPLOAD_MB": "", "DATABASE_URL": ""})
    assert default.max_upload_bytes == 50_000_000 and default.ledger_url.startswith("sqlite:")


def test_unknown_cohort_variables_are_reported_with_the_nearest_name():
    lines = preflight.unknown_settings({"COHORT_BUDGET": "{}", "COHORT_TEST_X": "1",
                                        "COHORT_USERS_FILE": "u", "PATH": "/bin"})
    assert lines == ["COHORT_BUDGET is not a setting of this version (did you mean "
                     "COHORT_BUDGETS?); it is ignored."]


# -- the env file: what bash reads is what the CLI reads ----------------------------------------

def _bash_env(text: str) -> dict[str, str]:
    """The variables bash defines from ``text`` with ``set -a; . FILE; set +a``."""
    script = ('set -a; . "$1"; set +a; "$0" -c '
              '"import json, os; print(json.dumps(dict(os.environ)))"')
    with tempfile.NamedTemporaryFile("w", suffix=".env") as fh:
        fh.write(text)
        fh.flush()
        done = subprocess.run(["bash", "-c", script, sys.executable, fh.name],
                              env={"PATH": os.environ["PATH"]}, capture_output=True, text=True,
                              check=True)
    return json.loads(done.stdout)


def test_the_shipped_env_file_reads_the_same_in_bash_and_in_the_cli(tmp_path):
    text = (DEPLOY / "cohort.env").read_text()
    text = text.replace("SECRET_KEY=\n", f"SECRET_KEY={'ab12' * 16}\n")
    text += "# a password with URL-safe characters only\nTRICKY='a b {\"c\": [1, 2]} d=e'\n"
    ours = parse_env_text(text)
    theirs = _bash_env(text)
    assert {k: theirs.get(k) for k in ours} == ours
    assert isinstance(json.loads(ours["COHORT_BUDGETS"])["collaborator"], int | float)
    assert "COHORT_BUDGETS" in ours and "COHORT_LOG_FORMAT" in ours
    cfg = AppConfig.from_env({**ours, "COHORT_USERS_FILE": str(tmp_path / "u.json")})
    assert cfg.proxy_count == 1 and cfg.cookie_secure is True and cfg.runner_processes >= 1


@pytest.mark.parametrize("line", [
    'COHORT_BUDGETS={"collaborator": 5}',       # bash: removes the quotes, splits at the space
    'COHORT_BUDGETS={"collaborator":5}',        # bash: removes the quotes
    "SECRET_KEY=abc def",                       # bash: runs "def"
    "DATABASE_URL='postgresql://u:p$x@h/db'",   # a $ inside quotes
    'SECRET_KEY="abc"',                         # double quotes: bash and systemd differ on \\ $
    "SECRET_KEY=~/key",                         # bash expands ~
    "export SECRET_KEY=abc",                    # systemd does not know export
    "SECRET_KEY = abc",                         # bash: runs SECRET_KEY
    "; a systemd-only comment",
])
def test_lines_bash_and_systemd_would_read_differently_are_refused(line):
    with pytest.raises(EnvFileError, match=r"line 2"):
        parse_env_text(f"# header\n{line}\n", "cohort.env")


def test_an_unreadable_env_file_is_named(tmp_path):
    with pytest.raises(EnvFileError, match="cannot be read"):
        read_env_file(tmp_path / "missing.env")


# -- start-up checks beyond the variables --------------------------------------------------------

def test_start_up_checks_name_the_file_or_database_at_fault(tmp_path, users):
    base = {"COHORT_USERS_FILE": str(users), "SECRET_KEY": SECRET,
            "COHORT_DATA_DIR": str(tmp_path / "var")}
    cfg = preflight.check(base)
    assert cfg.ledger_url.startswith("sqlite:")
    empty = tmp_path / "empty.json"
    empty.write_text('{"version": 1, "users": {}}')
    cases = [
        ({"COHORT_USERS_FILE": str(tmp_path / "none.json")}, "COHORT_USERS_FILE", "add-user"),
        ({"COHORT_USERS_FILE": str(empty)}, "COHORT_USERS_FILE", "lists no users"),
        ({"COHORT_DATASETS": str(tmp_path / "gone.csv")}, "COHORT_DATASETS", "gone.csv"),
        ({"COHORT_WAREHOUSE": str(tmp_path / "gone.json")}, "COHORT_WAREHOUSE", "gone.json"),
        ({"DATABASE_URL": "postgresql+psycopg://cohort:s3cr3t-pw@127.0.0.1:1/cohort"},
         "DATABASE_URL", "cannot open the ledger database"),
    ]
    for override, variable, words in cases:
        with pytest.raises(ConfigError) as caught:
            preflight.check({**base, **override})
        assert caught.value.variable == variable and words in str(caught.value)
        assert "s3cr3t-pw" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_ledger_written_by_a_newer_version_is_refused(tmp_path):
    from services.ledger.models import SCHEMA_VERSION
    from services.ledger.store import Ledger

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    Ledger(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE ledger_meta SET value = :v WHERE key = 'schema_version'"),
                     {"v": str(SCHEMA_VERSION + 1)})
    engine.dispose()
    with pytest.raises(ConfigError, match="newer version.*restore the backup"):
        preflight.check({"DATABASE_URL": url, "COHORT_DATA_DIR": str(tmp_path)})


def test_the_start_up_log_says_whether_the_ledger_will_be_created_or_migrated(tmp_path,
                                                                              caplog):
    from services.ledger.models import SCHEMA_VERSION
    from services.ledger.store import Ledger

    env = {"COHORT_DATA_DIR": str(tmp_path)}
    with caplog.at_level(logging.INFO, logger="services.ops.preflight"):
        preflight.check(env)
        Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}").close()
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE ledger_meta SET value = :v WHERE key = "
                                 "'schema_version'"), {"v": str(SCHEMA_VERSION - 1)})
        engine.dispose()
        preflight.check(env)
    notes = [r.getMessage() for r in caplog.records if "Ledger database" in r.getMessage()]
    assert notes[0].endswith(f"no ledger yet (created at start, schema {SCHEMA_VERSION}).")
    assert notes[1].endswith(f"schema {SCHEMA_VERSION - 1}, migrated to {SCHEMA_VERSION} at "
                             "start.")


# -- under gunicorn: one line from the master, no worker ----------------------------------------

@pytest.mark.skipif(GUNICORN is None, reason="gunicorn is not installed")
@pytest.mark.parametrize("override,variable", [
    ({"COHORT_BUDGETS": "{collaborator: 5}"}, "COHORT_BUDGETS"),
    ({"DATABASE_URL": "postgresql+psycopg://cohort:pw@127.0.0.1:1/cohort"}, "DATABASE_URL"),
    ({"SECRET_KEY": ""}, "SECRET_KEY"),
])
def test_gunicorn_refuses_a_wrong_configuration_with_one_line(tmp_path, users, override,
                                                              variable):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("COHORT_") and k not in ("DATABASE_URL", "SECRET_KEY")}
    env.update({"COHORT_USERS_FILE": str(users), "SECRET_KEY": SECRET,
                "COHORT_DATA_DIR": str(tmp_path / "var"), **override,
                "PYTHONPATH": str(ROOT)})
    done = subprocess.run([GUNICORN, "-c", str(DEPLOY / "gunicorn.conf.py"), "-b",
                           "127.0.0.1:0", "app:server"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == preflight.EX_CONFIG
    out = done.stdout + done.stderr
    errors = [line for line in out.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"Not started: {variable}: " in errors[0], out
    assert "Traceback" not in out and "Booting worker" not in out
    assert "pw@" not in out
