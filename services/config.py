"""Application configuration: every setting read from the environment, parsed and checked once.

``AppConfig.from_env`` turns the environment into a typed configuration or raises
``ConfigError``, whose one line names the variable and says what to do, before anything
connects. Defaults: the sample cohort, a SQLite ledger in ``var/``, one local owner with no
login. ``SETTINGS`` lists every variable (README "Configuration" documents each).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from services.identity.limits import BodyLimits

ROOT = Path(__file__).resolve().parent.parent
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
MIN_SECRET_LEN = 16
SAMESITE = ("Lax", "Strict", "None")
LOG_FORMATS = ("text", "json")
_MEMORY = re.compile(r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$", re.IGNORECASE)
DATABASE_EXAMPLE = "postgresql+psycopg://cohort:PASSWORD@127.0.0.1:5432/cohort"

SETTINGS = (
    "DATABASE_URL", "COHORT_USERS_FILE", "SECRET_KEY", "COHORT_BUDGETS",
    "COHORT_BUDGET_RENEWAL_DAYS", "COHORT_DATA_DIR", "COHORT_DATASETS", "COHORT_MAX_UPLOAD_MB",
    "COHORT_MAX_REQUEST_KB", "COHORT_SESSION_IDLE_MINUTES", "COHORT_SESSION_MAX_HOURS",
    "COHORT_COOKIE_SECURE", "COHORT_COOKIE_SAMESITE", "COHORT_PROXY_COUNT", "COHORT_HSTS_SECONDS",
    "COHORT_LOGIN_MAX_FAILURES", "COHORT_LOGIN_CLIENT_MAX_FAILURES",
    "COHORT_LOGIN_BACKOFF_SECONDS", "COHORT_LOGIN_BACKOFF_MAX_SECONDS", "COHORT_LARGE_FILE_MB",
    "COHORT_WAREHOUSE", "COHORT_DUCKDB_MEMORY", "COHORT_RUNNER_PROCESSES",
    "COHORT_LOG_FORMAT", "HOST", "PORT", "DASH_DEBUG",
)
"""Every variable the app reads (README "Configuration")."""


class ConfigError(ValueError):
    """A setting the server must not start with: ``str()`` is one line naming the variable."""

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        super().__init__(f"{variable}: {problem}")


class _Env:
    """Typed reads of one environment; each failure names its variable and the fix."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def text(self, name: str) -> str | None:
        """The value, stripped; None when unset or blank."""
        value = self.env.get(name)
        return value.strip() if value is not None and value.strip() else None

    def number(self, name: str, default: float, *, whole: bool = False,
               minimum: float = 0, example: str = "") -> float:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = int(raw) if whole else float(raw)
        except ValueError:
            kind = "a whole number" if whole else "a number"
            raise ConfigError(name, f"{raw!r} is not {kind}; set e.g. {name}={example or default}"
                                    f" or remove the line for the default ({default}).") from None
        if not minimum <= value < float("inf"):  # also refuses nan
            raise ConfigError(name, f"{raw!r} must be at least {minimum:g}; set e.g. "
                                    f"{name}={example or default} or remove the line.")
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise ConfigError(name, f"{raw!r} is not a switch; set {name}=1 (on) or {name}=0 (off).")

    def choice(self, name: str, default: str, options: tuple[str, ...]) -> str:
        raw = self.text(name)
        if raw is None:
            return default
        for option in options:
            if raw.lower() == option.lower():
                return option
        raise ConfigError(name, f"{raw!r} is not one of {', '.join(options)}; set one of them "
                                f"or remove the line for the default ({default}).")

    def path(self, name: str) -> Path | None:
        raw = self.text(name)
        return Path(raw) if raw is not None else None


def _budgets(env: _Env, renewal_days: int | None) -> dict[str, Any]:
    """COHORT_BUDGETS: a JSON object the ledger's BudgetPolicy accepts."""
    from services.ledger.policy import BudgetPolicy

    raw = env.text("COHORT_BUDGETS")
    if raw is None:
        return {}
    example = '\'{"collaborator": 8, "third_party": 5}\''
    try:
        budgets = json.loads(raw)
    except json.JSONDecodeError as exc:
        hint = (" (its double quotes were removed: in the env file put the whole JSON in "
                "single quotes)" if '"' not in raw else "")
        raise ConfigError("COHORT_BUDGETS", f"{raw!r} is not valid JSON ({exc.msg} at "
                                            f"character {exc.pos}){hint}; write it as "
                                            f"COHORT_BUDGETS={example}.") from None
    if not isinstance(budgets, dict):
        raise ConfigError("COHORT_BUDGETS", f"must be a JSON object, e.g. {example}.")
    renewal = {"renewal_days": renewal_days} if renewal_days else {}
    try:
        BudgetPolicy.from_mapping({**budgets, **renewal})
    except (TypeError, ValueError) as exc:
        raise ConfigError("COHORT_BUDGETS", f"{exc} (see docs/accounting.md)") from None
    return budgets


def check_database_url(url: str) -> None:
    """A SQLite or PostgreSQL SQLAlchemy URL whose driver is installed (nothing connects)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError):
        raise ConfigError("DATABASE_URL", f"'{_hide_password(url)}' is not a SQLite or "
                                          f"PostgreSQL URL; use e.g. {DATABASE_EXAMPLE}.") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ConfigError("DATABASE_URL", f"the ledger needs SQLite or PostgreSQL, not "
                                          f"'{backend}'; use e.g. {DATABASE_EXAMPLE}.")
    driver = getattr(dialect, "driver", "")
    module = {"psycopg": "psycopg", "psycopg2": "psycopg2"}.get(driver)
    if module and find_spec(module) is None:
        raise ConfigError("DATABASE_URL", f"the driver '{driver}' is not installed; install the "
                                          "'postgres' extra (pip install -e '.[postgres]') and "
                                          f"use a URL like {DATABASE_EXAMPLE}.")


def _hide_password(url: str) -> str:
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def describe_database(url: str) -> str:
    """The URL with its password hidden, for logs and the CLI."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL that does not parse is shown masked by hand
        return _hide_password(url)


@dataclass(frozen=True)
class AppConfig:
    """What the app needs to start. Defaults: SQLite ledger, sample cohort, one local owner."""

    data_dir: Path = ROOT / "var"
    database_url: str | None = None          # None -> sqlite file under data_dir
    users_file: Path | None = None           # None -> embedded mode: one local owner, loopback only
    secret_key: str | None = None
    budgets: Mapping[str, float | None] = field(default_factory=dict)  # role -> ε limit
    renewal_days: int | None = None
    max_upload_bytes: int = 50_000_000
    dataset_paths: tuple[Path, ...] = ()
    large_file_bytes: int = 50_000_000       # files above it are queried with DuckDB (Parquet)
    warehouse_file: Path | None = None       # JSON list of PostgreSQL / Spark tables
    duckdb_memory: str = "512MB"             # DuckDB memory limit per worker process
    runner_processes: int = 0                # heavy work: 0 inline, n children per worker
    host: str = "127.0.0.1"
    port: int = 8050
    debug: bool = False
    log_format: str = "text"                 # "json": one JSON object per log line
    # -- web hardening (see docs/security.md) --
    session_idle_minutes: float = 30.0
    session_max_hours: float = 12.0
    cookie_secure: bool | None = None        # None -> Secure for every request not on loopback
    cookie_samesite: str = "Lax"
    proxy_count: int = 0                     # reverse proxies in front (ProxyFix); 0 = none
    hsts_seconds: int = 31_536_000
    max_request_kb: int = 512                # request body limit for non-owners
    login_max_failures: int = 5              # per account, before the backoff starts
    login_client_max_failures: int = 20      # per client address
    login_backoff_seconds: float = 30.0      # first wait; doubles per further failure ...
    login_backoff_max_seconds: float = 900.0  # ... up to this

    @property
    def ledger_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'ledger.sqlite').as_posix()}"

    def as_mapping(self) -> dict[str, Any]:
        """The Flask-style mapping handed to the identity service."""
        return {
            "USERS_FILE": str(self.users_file) if self.users_file else None,
            "SECRET_KEY": self.secret_key,
            "HOST": self.host,
            "DATABASE_URL": self.ledger_url,
            "SESSION_IDLE_MINUTES": self.session_idle_minutes,
            "SESSION_MAX_HOURS": self.session_max_hours,
            "SESSION_COOKIE_SECURE": self.cookie_secure,
            "SESSION_COOKIE_SAMESITE": self.cookie_samesite,
            "PROXY_COUNT": self.proxy_count,
            "HSTS_SECONDS": self.hsts_seconds,
            "BODY_LIMITS": BodyLimits.for_upload(self.max_upload_bytes,
                                                 member=self.max_request_kb * 1024),
            "LOGIN_MAX_FAILURES": self.login_max_failures,
            "LOGIN_CLIENT_MAX_FAILURES": self.login_client_max_failures,
            "LOGIN_BACKOFF_SECONDS": self.login_backoff_seconds,
            "LOGIN_BACKOFF_MAX_SECONDS": self.login_backoff_max_seconds,
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AppConfig:
        """Every setting of ``env`` (default: the process environment), checked; raises
        ConfigError naming the first wrong variable. Reads no file and opens no connection."""
        e = _Env(os.environ if env is None else env)
        users_file = e.path("COHORT_USERS_FILE")
        database_url = _database_url(e, users=users_file is not None)
        secret = e.text("SECRET_KEY")
        if users_file is not None and (secret is None or len(secret) < MIN_SECRET_LEN):
            raise ConfigError("SECRET_KEY", "users are configured (COHORT_USERS_FILE) but the "
                                            f"key is missing or shorter than {MIN_SECRET_LEN} "
                                            "characters; generate one with python3 -c 'import "
                                            "secrets; print(secrets.token_hex(32))'.")
        renewal = e.number("COHORT_BUDGET_RENEWAL_DAYS", 0, whole=True, minimum=1, example="30")
        cookie = e.text("COHORT_COOKIE_SECURE") or "auto"   # auto: decided per request
        if cookie.lower() not in _TRUE | _FALSE | {"auto"}:
            raise ConfigError("COHORT_COOKIE_SECURE", f"{cookie!r} is not 1, 0 or auto; set "
                                                      "COHORT_COOKIE_SECURE=1 behind HTTPS.")
        cookie_secure = None if cookie.lower() == "auto" else cookie.lower() in _TRUE
        samesite = e.choice("COHORT_COOKIE_SAMESITE", "Lax", SAMESITE)
        if samesite == "None" and cookie_secure is not True:
            raise ConfigError("COHORT_COOKIE_SAMESITE", "None needs COHORT_COOKIE_SECURE=1 "
                                                        "(browsers drop such cookies otherwise);"
                                                        " use Lax.")
        proxies = int(e.number("COHORT_PROXY_COUNT", 0, whole=True, example="1"))
        if proxies and users_file is None:
            raise ConfigError("COHORT_PROXY_COUNT", "a reverse proxy needs users configured "
                                                    "(COHORT_USERS_FILE and SECRET_KEY); set it "
                                                    "to 0 or configure users.")
        backoff = e.number("COHORT_LOGIN_BACKOFF_SECONDS", 30.0, minimum=0.001)
        backoff_max = e.number("COHORT_LOGIN_BACKOFF_MAX_SECONDS", 900.0, minimum=0.001)
        if backoff_max < backoff:
            raise ConfigError("COHORT_LOGIN_BACKOFF_MAX_SECONDS",
                              f"{backoff_max:g} is below COHORT_LOGIN_BACKOFF_SECONDS "
                              f"({backoff:g}); the cap must be at least the first wait.")
        memory = e.text("COHORT_DUCKDB_MEMORY") or "512MB"
        if not _MEMORY.match(memory):
            raise ConfigError("COHORT_DUCKDB_MEMORY", f"{memory!r} is not a size; set e.g. "
                                                      "COHORT_DUCKDB_MEMORY=512MB or 2GB.")
        datasets = e.text("COHORT_DATASETS") or ""
        return cls(
            data_dir=e.path("COHORT_DATA_DIR") or ROOT / "var",
            database_url=database_url,
            users_file=users_file,
            secret_key=secret,
            budgets=_budgets(e, int(renewal) or None),
            renewal_days=int(renewal) or None,
            max_upload_bytes=int(e.number("COHORT_MAX_UPLOAD_MB", 50, minimum=0.001)
                                 * 1_000_000),
            dataset_paths=tuple(Path(p) for p in datasets.split(os.pathsep) if p.strip()),
            large_file_bytes=int(e.number("COHORT_LARGE_FILE_MB", 50) * 1_000_000),
            warehouse_file=e.path("COHORT_WAREHOUSE"),
            duckdb_memory=memory,
            runner_processes=int(e.number("COHORT_RUNNER_PROCESSES", 0, whole=True,
                                          example="1")),
            host=e.text("HOST") or "127.0.0.1",
            port=int(e.number("PORT", 8050, whole=True, minimum=1, example="8050")),
            debug=e.flag("DASH_DEBUG", False),
            log_format=e.choice("COHORT_LOG_FORMAT", "text", LOG_FORMATS),
            session_idle_minutes=e.number("COHORT_SESSION_IDLE_MINUTES", 30.0, minimum=0.01),
            session_max_hours=e.number("COHORT_SESSION_MAX_HOURS", 12.0, minimum=0.01),
            cookie_secure=cookie_secure,
            cookie_samesite=samesite,
            proxy_count=proxies,
            hsts_seconds=int(e.number("COHORT_HSTS_SECONDS", 31_536_000, whole=True)),
            max_request_kb=int(e.number("COHORT_MAX_REQUEST_KB", 512, whole=True, minimum=1)),
            login_max_failures=int(e.number("COHORT_LOGIN_MAX_FAILURES", 5, whole=True,
                                            minimum=1)),
            login_client_max_failures=int(e.number("COHORT_LOGIN_CLIENT_MAX_FAILURES", 20,
                                                   whole=True, minimum=1)),
            login_backoff_seconds=backoff,
            login_backoff_max_seconds=backoff_max,
        )

    @classmethod
    def coerce(cls, config: AppConfig | Mapping[str, Any] | None) -> AppConfig:
        """Accept an AppConfig, a mapping of field overrides, or None (environment)."""
        if isinstance(config, AppConfig):
            return config
        base = cls.from_env()
        if not config:
            return base
        known = {k: v for k, v in config.items() if k in cls.__dataclass_fields__}
        if "data_dir" in known:
            known["data_dir"] = Path(known["data_dir"])
        if known.get("warehouse_file"):
            known["warehouse_file"] = Path(known["warehouse_file"])
        return replace(base, **known)


def _database_url(env: _Env, *, users: bool) -> str | None:
    """DATABASE_URL, checked. Set but empty while users are configured is refused: the
    shared ledger would silently become a SQLite file on this machine."""
    url = env.text("DATABASE_URL")
    if url is None:
        if users and "DATABASE_URL" in env.env:
            raise ConfigError("DATABASE_URL", "is empty; set it to the ledger's database, e.g. "
                                              f"{DATABASE_EXAMPLE}, or delete the line to keep "
                                              "the ledger in SQLite under COHORT_DATA_DIR.")
        return None
    check_database_url(url)
    return url
