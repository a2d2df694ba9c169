"""``cohort-explorer`` console script: manage users and start the server safely.

    cohort-explorer [--env-file FILE] add-user NAME --role collaborator [--users-file PATH]
                    [--password-stdin] [--replace]
    cohort-explorer [--env-file FILE] remove-user NAME [--users-file PATH]
    cohort-explorer [--env-file FILE] revoke-sessions NAME
    cohort-explorer [--env-file FILE] failed-logins [--limit 50]
    cohort-explorer [--env-file FILE] check
    cohort-explorer [--env-file FILE] serve [--host 127.0.0.1] [--port 8050]

Every command reads the server's configuration: the environment, overlaid by ``--env-file``
(the same file systemd gives the server), checked as the server checks it. Nothing is guessed:
a command that needs the users file or the session database refuses to run until it is named
(``COHORT_USERS_FILE`` / ``--users-file``; ``DATABASE_URL`` or ``COHORT_DATA_DIR``), and each
command says which file and database it acted on. ``revoke-sessions`` and ``failed-logins``
also refuse a database the server has never used. The users file keeps its owner and mode.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from services.config import AppConfig, ConfigError, describe_database
from services.identity.db import IdentityDB
from services.identity.roles import Role
from services.identity.session import AuthConfigError, assert_bind_allowed
from services.identity.sessions import SessionStore
from services.identity.tables import sessions as _SESSIONS
from services.identity.throttle import LoginThrottle
from services.identity.users import UsersFileError, add_user, remove_user
from services.ops.envfile import EnvFileError, read_env_file
from services.ops.preflight import owner_and_mode

NO_CONFIG = ("pass --env-file with the server's env file (e.g. --env-file "
             "/etc/cohort/cohort.env)")


class CliError(RuntimeError):
    """A refusal: one line, nothing changed."""


class Context:
    """The configuration a command acts on: the environment overlaid by ``--env-file``."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.config = AppConfig.from_env(self.env)

    def users_file(self, given: Path | None) -> Path:
        path = given or self.config.users_file
        if path is None:
            raise CliError(f"no users file is configured: {NO_CONFIG}, or --users-file PATH; "
                           "nothing was changed.")
        return path

    def database_url(self) -> str:
        """The server's database; refused unless named (never a default in this checkout)."""
        if not (self.config.database_url or self.env.get("COHORT_DATA_DIR", "").strip()):
            raise CliError(f"no database is configured, so the server's sessions cannot be "
                           f"reached: {NO_CONFIG}, or set DATABASE_URL; nothing was changed.")
        return self.config.ledger_url

    def identity_db(self, *, must_exist: bool) -> IdentityDB | None:
        """The session tables of the server's database (None: never used by a server, and
        ``must_exist`` is False)."""
        url = self.database_url()
        print(f"Database: {describe_database(url)}")
        if not _has_sessions_table(url):
            if must_exist:
                raise CliError(f"{describe_database(url)} has no session tables: no server has "
                               "run on it. Check DATABASE_URL / COHORT_DATA_DIR (or "
                               "--env-file) against the server's.")
            return None
        return IdentityDB(url)


def _has_sessions_table(url: str) -> bool:
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return False   # do not create an empty SQLite file by looking
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return inspect(conn).has_table(_SESSIONS.name)
    finally:
        engine.dispose()


def _describe_file(path: Path) -> str:
    return f"{path} ({owner_and_mode(path)})"


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Repeat password: "):
        raise UsersFileError("The two passwords differ; nothing was changed.")
    return first


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cohort-explorer", description="Manage dashboard users and start the server safely.")
    parser.add_argument("--env-file", type=Path, default=None,
                        help="the server's env file (e.g. /etc/cohort/cohort.env); its settings "
                             "override the environment")
    sub = parser.add_subparsers(dest="command", required=True)

    add = sub.add_parser("add-user", help="add a user (or update one with --replace)")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=[r.value for r in Role])
    add.add_argument("--users-file", type=Path, default=None, help="default: $COHORT_USERS_FILE")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from one line of standard input")
    add.add_argument("--replace", action="store_true",
                     help="update an existing user (ends their sessions)")

    rm = sub.add_parser("remove-user", help="remove a user; their sessions end at once")
    rm.add_argument("name")
    rm.add_argument("--users-file", type=Path, default=None, help="default: $COHORT_USERS_FILE")

    revoke = sub.add_parser("revoke-sessions", help="sign a user out everywhere")
    revoke.add_argument("name")

    failed = sub.add_parser("failed-logins", help="the audit log of failed sign-ins, newest first")
    failed.add_argument("--limit", type=int, default=50)

    sub.add_parser("check", help="check the configuration, files and database as the server "
                                 "does at start")

    serve = sub.add_parser("serve", help="run the dashboard (development server)")
    serve.add_argument("--host", default=None, help="default: $HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: $PORT or 8050")
    return parser


def _end_sessions(ctx: Context, name: str, *, must_exist: bool) -> None:
    db = ctx.identity_db(must_exist=must_exist)
    if db is None:
        print(f"No session tables yet: '{name}' has no session to end.")
        return
    try:
        print(f"Ended {SessionStore(db).revoke_user(name)} session(s) of '{name}'.")
    finally:
        db.close()


def _failed_logins(ctx: Context, limit: int) -> None:
    db = ctx.identity_db(must_exist=True)
    try:
        rows = LoginThrottle(db).failed_logins(limit=max(1, limit))
    finally:
        db.close()
    if not rows:
        print("No failed sign-ins recorded.")
    for row in rows:
        print(f"{row.at:%Y-%m-%d %H:%M:%S} UTC  {row.client:<24} {row.user!r:<26} {row.reason}")


def _add_user(ctx: Context, args: argparse.Namespace) -> None:
    path = ctx.users_file(args.users_file)
    if args.replace:
        ctx.database_url()   # refuse before anything changes
    record = add_user(path, args.name, args.role, _read_password(args.password_stdin),
                      replace=args.replace)
    print(f"Saved user '{record.name}' ({record.role.value}) in {_describe_file(path)}.")
    if args.replace:
        _end_sessions(ctx, record.name, must_exist=False)
    if ctx.config.users_file != path:
        print(f"Start the server with COHORT_USERS_FILE={path} and a SECRET_KEY set.")


def _remove_user(ctx: Context, args: argparse.Namespace) -> None:
    path = ctx.users_file(args.users_file)
    ctx.database_url()   # refuse before anything changes
    remove_user(path, args.name)
    print(f"Removed user '{args.name}' from {_describe_file(path)}.")
    _end_sessions(ctx, args.name, must_exist=False)


def _check(env: Mapping[str, str]) -> None:
    from services.ops import preflight

    cfg = preflight.check(env)
    for line in preflight.unknown_settings(env):
        print(f"warning: {line}")
    print(f"Configuration OK. Database: {describe_database(cfg.ledger_url)}; users file: "
          f"{cfg.users_file or 'none (embedded mode)'}; data directory: {cfg.data_dir}.")


def _serve(env: Mapping[str, str], host: str | None, port: int | None) -> None:
    from services.ops import logs, preflight

    cfg = AppConfig.from_env(env)
    cfg = replace(cfg, host=host or cfg.host, port=port or cfg.port)
    assert_bind_allowed(cfg.host, cfg.as_mapping())
    logs.configure(cfg.log_format)
    preflight.check(env)
    from app import create_app  # imported late: the user commands must not need the app

    create_app(cfg).run(host=cfg.host, port=cfg.port, debug=cfg.debug)


def _environment(env_file: Path | None) -> dict[str, str]:
    return {**os.environ, **(read_env_file(env_file) if env_file is not None else {})}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        env = _environment(args.env_file)
        if args.command == "check":
            _check(env)
            return 0
        if args.command == "serve":
            _serve(env, args.host, args.port)
            return 0
        ctx = Context(env)
        if args.command == "revoke-sessions":
            _end_sessions(ctx, args.name, must_exist=True)
        elif args.command == "failed-logins":
            _failed_logins(ctx, args.limit)
        elif args.command == "add-user":
            _add_user(ctx, args)
        else:
            _remove_user(ctx, args)
    except (CliError, ConfigError, EnvFileError, UsersFileError, AuthConfigError) as exc:
        print(f"cohort-explorer: {exc}", file=sys.stderr)
        return 2
    except SQLAlchemyError as exc:
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
        print(f"cohort-explorer: the session database could not be used ({reason}). Check "
              "DATABASE_URL / COHORT_DATA_DIR.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
