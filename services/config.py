"""Application configuration, read from the environment with safe embedded defaults."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from services.identity.limits import BodyLimits

ROOT = Path(__file__).resolve().parent.parent
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _tristate(text: str) -> bool | None:
    """'1'/'true' -> True, '0'/'false' -> False, 'auto' or '' -> None (decided per request)."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if value in ("", "auto"):
        return None
    raise ValueError(f"Expected 1, 0 or auto, got {text!r}.")


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
    offload_uncached: bool = False           # uncached releases in a child process per worker
    host: str = "127.0.0.1"
    port: int = 8050
    debug: bool = False
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
        env = os.environ if env is None else env
        budgets = json.loads(env["COHORT_BUDGETS"]) if env.get("COHORT_BUDGETS") else {}
        paths = tuple(Path(p) for p in env.get("COHORT_DATASETS", "").split(os.pathsep) if p)
        return cls(
            data_dir=Path(env.get("COHORT_DATA_DIR", str(ROOT / "var"))),
            database_url=env.get("DATABASE_URL") or None,
            users_file=Path(env["COHORT_USERS_FILE"]) if env.get("COHORT_USERS_FILE") else None,
            secret_key=env.get("SECRET_KEY") or None,
            budgets=budgets,
            renewal_days=int(env["COHORT_BUDGET_RENEWAL_DAYS"])
            if env.get("COHORT_BUDGET_RENEWAL_DAYS") else None,
            max_upload_bytes=int(float(env.get("COHORT_MAX_UPLOAD_MB", "50")) * 1_000_000),
            dataset_paths=paths,
            large_file_bytes=int(float(env.get("COHORT_LARGE_FILE_MB", "50")) * 1_000_000),
            warehouse_file=Path(env["COHORT_WAREHOUSE"]) if env.get("COHORT_WAREHOUSE") else None,
            duckdb_memory=env.get("COHORT_DUCKDB_MEMORY", "512MB"),
            offload_uncached=env.get("COHORT_OFFLOAD_UNCACHED", "") == "1",
            host=env.get("HOST", "127.0.0.1"),
            port=int(env.get("PORT", "8050")),
            debug=env.get("DASH_DEBUG", "") == "1",
            session_idle_minutes=float(env.get("COHORT_SESSION_IDLE_MINUTES", "30")),
            session_max_hours=float(env.get("COHORT_SESSION_MAX_HOURS", "12")),
            cookie_secure=_tristate(env.get("COHORT_COOKIE_SECURE", "auto")),
            cookie_samesite=env.get("COHORT_COOKIE_SAMESITE", "Lax"),
            proxy_count=int(env.get("COHORT_PROXY_COUNT", "0")),
            hsts_seconds=int(env.get("COHORT_HSTS_SECONDS", "31536000")),
            max_request_kb=int(env.get("COHORT_MAX_REQUEST_KB", "512")),
            login_max_failures=int(env.get("COHORT_LOGIN_MAX_FAILURES", "5")),
            login_client_max_failures=int(env.get("COHORT_LOGIN_CLIENT_MAX_FAILURES", "20")),
            login_backoff_seconds=float(env.get("COHORT_LOGIN_BACKOFF_SECONDS", "30")),
            login_backoff_max_seconds=float(env.get("COHORT_LOGIN_BACKOFF_MAX_SECONDS", "900")),
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
