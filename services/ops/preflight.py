"""Start-up checks: every setting, the files they name and the database, once, before serving.

``check`` runs in gunicorn's master before any worker is forked (``on_starting`` in
``docs/deploy/gunicorn.conf.py``), in ``make run`` and in ``cohort-explorer serve``: a wrong
setting stops the server with one line naming the variable and the fix, instead of a traceback
from every worker. ``database_status`` is also what ``/healthz`` reports.
"""

from __future__ import annotations

import difflib
import logging
import os
import pwd
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, inspect, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from services.config import SETTINGS, AppConfig, ConfigError, describe_database

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 10
EX_CONFIG = 78
"""Exit status of a refused configuration (sysexits' EX_CONFIG); the systemd unit does not
restart on it (``RestartPreventExitStatus=78``)."""


def check(env: Mapping[str, str] | None = None, *, connect: bool = True) -> AppConfig:
    """The checked configuration of ``env`` (default: the process environment).

    Raises ConfigError for the first wrong setting, unreadable users file, missing dataset,
    unwritable data directory, unreachable database or a ledger written by a newer version.
    """
    env = os.environ if env is None else env
    cfg = AppConfig.from_env(env)
    for line in unknown_settings(env):
        log.warning(line)
    check_files(cfg)
    if connect:
        log.info("Ledger database %s: reachable, %s.", describe_database(cfg.ledger_url),
                 _schema_note(database_status_of(cfg)["schema_version"]))
    if cfg.users_file is not None:
        log.info("Users mode: sign-in required (users file %s).", cfg.users_file)
    else:
        log.info("Embedded mode: one local owner, loopback only (no COHORT_USERS_FILE).")
    return cfg


def _schema_note(stored: int | None) -> str:
    from services.ledger.models import SCHEMA_VERSION

    if stored is None:
        return f"no ledger yet (created at start, schema {SCHEMA_VERSION})"
    if stored < SCHEMA_VERSION:
        return f"schema {stored}, migrated to {SCHEMA_VERSION} at start"
    return f"schema {stored}"


def unknown_settings(env: Mapping[str, str]) -> list[str]:
    """A warning per COHORT_* variable this version does not read (a typo keeps a default)."""
    out = []
    for name in sorted(env):
        if name.startswith("COHORT_") and name not in SETTINGS \
                and not name.startswith("COHORT_TEST_"):
            near = difflib.get_close_matches(name, SETTINGS, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            out.append(f"{name} is not a setting of this version{hint}; it is ignored.")
    return out


def owner_and_mode(path: Path) -> str:
    """'owner NAME, mode 0600': who can read a file the service needs."""
    st = path.stat()
    try:
        name = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        name = str(st.st_uid)
    return f"owner {name}, mode {stat.S_IMODE(st.st_mode):04o}"


def _me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def check_files(cfg: AppConfig) -> None:
    """The users file lists users this process can read; the data directory is writable; every
    configured dataset and the warehouse file exist."""
    from services.identity.users import UsersFileError, load_users

    if cfg.users_file is not None:
        path = cfg.users_file
        if path.exists() and not os.access(path, os.R_OK):
            raise ConfigError("COHORT_USERS_FILE", f"{path} is not readable by {_me()} "
                                                   f"({owner_and_mode(path)}); run: chown {_me()}: "
                                                   f"{path}; chmod 600 {path}.")
        try:
            users = load_users(path)
        except UsersFileError as exc:
            raise ConfigError("COHORT_USERS_FILE", str(exc)) from None
        if not users:
            raise ConfigError("COHORT_USERS_FILE", f"{path} lists no users; add one with "
                                                   "cohort-explorer --env-file ENV_FILE add-user "
                                                   "NAME --role owner.")
    variable = "COHORT_DATA_DIR"
    try:
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(variable, f"{cfg.data_dir} cannot be created ({exc.strerror}); "
                                    f"create it writable by {_me()}.") from None
    if not os.access(cfg.data_dir, os.W_OK | os.X_OK):
        raise ConfigError(variable, f"{cfg.data_dir} is not writable by {_me()} "
                                    f"({owner_and_mode(cfg.data_dir)}); run: chown {_me()}: "
                                    f"{cfg.data_dir}.")
    for path in cfg.dataset_paths:
        if not path.is_file():
            raise ConfigError("COHORT_DATASETS", f"{path} is not a readable file; fix the path "
                                                 "or remove it from the list.")
    if cfg.warehouse_file is not None:
        from services.data.errors import DatasetError
        from services.data.sources.large import read_warehouse_file

        try:
            read_warehouse_file(cfg.warehouse_file)
        except DatasetError as exc:
            raise ConfigError("COHORT_WAREHOUSE", str(exc)) from None


def database_status(engine: Engine) -> dict[str, Any]:
    """``{"database": "ok", "schema_version": N or None}`` over one connection of ``engine``
    (None: the ledger's tables do not exist yet). Raises SQLAlchemyError when unreachable."""
    from services.ledger.models import meta

    with engine.connect() as conn:
        schema = conn.get_execution_options().get("schema_translate_map", {}).get(None)
        if not inspect(conn).has_table(meta.name, schema=schema):
            return {"database": "ok", "schema_version": None}
        value = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")
                             ).scalar_one_or_none()
    return {"database": "ok", "schema_version": int(value) if value is not None else None}


def health(engine: Engine) -> tuple[dict[str, Any], int]:
    """What ``/healthz`` answers: (body, HTTP status). 200 with ``database_status`` when the
    database answers, 503 when not (the reason goes to the log, never to the caller)."""
    try:
        return {"status": "ok", **database_status(engine)}, 200
    except (SQLAlchemyError, OSError) as exc:
        log.warning("Health check: the ledger database is unreachable (%s).",
                    " ".join(str(exc).split())[:300])
        return {"status": "unavailable", "database": "unreachable", "schema_version": None}, 503


def database_status_of(cfg: AppConfig) -> dict[str, Any]:
    """``database_status`` of the configured ledger; ConfigError naming the variable (and the
    database, password hidden) when it cannot be reached or is newer than this version."""
    from services.ledger.models import SCHEMA_VERSION

    variable = "DATABASE_URL" if cfg.database_url else "COHORT_DATA_DIR"
    url = cfg.ledger_url
    args = {"connect_timeout": CONNECT_TIMEOUT_S} if url.startswith("postgresql") else {}
    engine = create_engine(url, poolclass=NullPool, connect_args=args)
    try:
        status = database_status(engine)
    except SQLAlchemyError as exc:
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
        raise ConfigError(variable, f"cannot open the ledger database "
                                    f"{describe_database(url)} ({reason}); check that it runs, "
                                    "that the role, password and database exist "
                                    "(docs/operations.md) and the URL.") from None
    finally:
        engine.dispose()
    stored = status["schema_version"]
    if stored is not None and stored > SCHEMA_VERSION:
        raise ConfigError(variable, f"the ledger at {describe_database(url)} was written by a "
                                    f"newer version (schema {stored}; this one reads up to "
                                    f"{SCHEMA_VERSION}): install that version again, or restore "
                                    "the backup taken before the upgrade (docs/operations.md).")
    return status


def check_or_exit(env: Mapping[str, str] | None = None, *, connect: bool = True) -> AppConfig:
    """``check``; on a refused configuration, log one line and exit with EX_CONFIG."""
    try:
        return check(env, connect=connect)
    except ConfigError as exc:
        log.error("Not started: %s", exc)
        raise SystemExit(EX_CONFIG) from None
