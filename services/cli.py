"""``cohort-explorer`` console script: manage users and start the server safely.

    cohort-explorer add-user NAME --role collaborator [--users-file PATH] [--password-stdin]
    cohort-explorer remove-user NAME [--users-file PATH]
    cohort-explorer revoke-sessions NAME
    cohort-explorer failed-logins [--limit 50]
    cohort-explorer serve [--host 127.0.0.1] [--port 8050]

``serve`` refuses a non-loopback host when no users file is configured (embedded mode).
Changing a password (``add-user --replace``) or removing a user ends their sessions at once on
every worker; the session and throttle tables are found through ``DATABASE_URL`` /
``COHORT_DATA_DIR``, as the server finds them.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from services.config import AppConfig
from services.identity.db import IdentityDB
from services.identity.roles import Role
from services.identity.session import AuthConfigError, assert_bind_allowed
from services.identity.sessions import SessionStore
from services.identity.throttle import LoginThrottle
from services.identity.users import UsersFileError, add_user, remove_user


def _default_users_file() -> Path:
    cfg = AppConfig.from_env()
    return cfg.users_file or cfg.data_dir / "users.json"


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
    sub = parser.add_subparsers(dest="command", required=True)

    add = sub.add_parser("add-user", help="add a user (or update one with --replace)")
    add.add_argument("name")
    add.add_argument("--role", required=True, choices=[r.value for r in Role])
    add.add_argument("--users-file", type=Path, default=None,
                     help="default: $COHORT_USERS_FILE, else <data dir>/users.json")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from one line of standard input")
    add.add_argument("--replace", action="store_true", help="update an existing user")

    rm = sub.add_parser("remove-user", help="remove a user; their sessions end at once")
    rm.add_argument("name")
    rm.add_argument("--users-file", type=Path, default=None)

    revoke = sub.add_parser("revoke-sessions", help="sign a user out everywhere")
    revoke.add_argument("name")

    failed = sub.add_parser("failed-logins", help="the audit log of failed sign-ins, newest first")
    failed.add_argument("--limit", type=int, default=50)

    serve = sub.add_parser("serve", help="run the dashboard (development server)")
    serve.add_argument("--host", default=None, help="default: $HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: $PORT or 8050")
    return parser


def _serve(host: str | None, port: int | None) -> int:
    cfg = AppConfig.from_env()
    cfg = replace(cfg, host=host or cfg.host, port=port or cfg.port)
    assert_bind_allowed(cfg.host, cfg.as_mapping())
    from app import create_app  # imported late: the user commands must not need the app

    create_app(cfg).run(host=cfg.host, port=cfg.port, debug=cfg.debug)
    return 0


def _identity_db() -> IdentityDB:
    return IdentityDB(AppConfig.from_env().ledger_url)


def _revoke(name: str) -> int:
    db = _identity_db()
    try:
        return SessionStore(db).revoke_user(name)
    finally:
        db.close()


def _failed_logins(limit: int) -> int:
    db = _identity_db()
    try:
        rows = LoginThrottle(db).failed_logins(limit=max(1, limit))
    finally:
        db.close()
    if not rows:
        print("No failed sign-ins recorded.")
    for row in rows:
        print(f"{row.at:%Y-%m-%d %H:%M:%S} UTC  {row.client:<24} {row.user!r:<26} {row.reason}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args.host, args.port)
        if args.command == "revoke-sessions":
            print(f"Ended {_revoke(args.name)} session(s) of '{args.name}'.")
            return 0
        if args.command == "failed-logins":
            return _failed_logins(args.limit)
        path = args.users_file or _default_users_file()
        if args.command == "add-user":
            record = add_user(path, args.name, args.role, _read_password(args.password_stdin),
                              replace=args.replace)
            print(f"Saved user '{record.name}' ({record.role.value}) in {path}.")
            if args.replace:
                print(f"Ended {_revoke(record.name)} open session(s) of '{record.name}'.")
            if os.environ.get("COHORT_USERS_FILE") != str(path):
                print(f"Start the server with COHORT_USERS_FILE={path} and a SECRET_KEY set.")
        else:
            remove_user(path, args.name)
            print(f"Removed user '{args.name}' from {path}; ended {_revoke(args.name)} "
                  "open session(s).")
    except (UsersFileError, AuthConfigError) as exc:
        print(f"cohort-explorer: {exc}", file=sys.stderr)
        return 2
    except SQLAlchemyError as exc:
        print(f"cohort-explorer: the session database could not be used ({exc}). Check "
              "DATABASE_URL / COHORT_DATA_DIR.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
