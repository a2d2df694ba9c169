"""The users file: names, roles and salted password hashes (werkzeug's scrypt), as JSON.

Format: ``{"version": 1, "users": {"alice": {"role": "collaborator", "password_hash": "..."}}}``.
The file is written atomically, keeping its owner and mode (new files: 0600), and re-read when
it changes on disk, so adding or removing a user takes effect without restarting the server.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

from services.identity.roles import Role

FORMAT_VERSION = 1
MIN_PASSWORD_LENGTH = 10
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


@functools.cache
def _dummy_hash() -> str:
    """Checked against when the user is unknown, so a wrong name costs the same time as a
    wrong password. Made on the first sign-in, not at import (a hash costs ~0.1 s of CPU)."""
    return generate_password_hash("not-a-real-password-0000")


class UsersFileError(ValueError):
    """The users file is missing, unreadable or malformed, or a user entry is invalid."""


@dataclass(frozen=True)
class UserRecord:
    """One account: its name, granted role and password hash."""

    name: str
    role: Role
    password_hash: str


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsersFileError(
            f"User name {name!r} is not allowed: use 1–64 letters, digits, '.', '_', '-' or '@', "
            "starting with a letter or digit."
        )
    return name


def load_users(path: str | os.PathLike[str]) -> dict[str, UserRecord]:
    """Read and validate the users file."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsersFileError(
            f"The users file {path} does not exist. Create it with "
            "`cohort-explorer add-user NAME --role ROLE`."
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise UsersFileError(f"The users file {path} cannot be read: {exc}.") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("users"), dict):
        raise UsersFileError(f"The users file {path} has no 'users' mapping.")
    users: dict[str, UserRecord] = {}
    for name, entry in raw["users"].items():
        validate_name(name)
        try:
            role = Role(entry["role"])
            pw_hash = str(entry["password_hash"])
        except (KeyError, TypeError, ValueError):
            raise UsersFileError(
                f"User '{name}' in {path} needs a role (owner, collaborator, third_party) "
                "and a password_hash."
            ) from None
        users[name] = UserRecord(name, role, pw_hash)
    return users


def _write_users(path: Path, users: dict[str, UserRecord]) -> None:
    """Replace the file atomically, keeping its owner, group and mode: the server's service
    user must still read it when an administrator runs the CLI as root. A new file gets
    mode 0600 and, when made by root, the owner and group of its directory."""
    payload = {"version": FORMAT_VERSION, "users": {
        u.name: {"role": u.role.value, "password_hash": u.password_hash}
        for u in sorted(users.values(), key=lambda u: u.name)
    }}
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = path.stat()
        uid, gid, mode = st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)
        if os.geteuid() not in (0, uid):
            raise UsersFileError(f"{path} belongs to uid {uid}: run this command as its owner "
                                 "(sudo -u OWNER ...) or as root, so that it keeps its owner; "
                                 "nothing was changed.")
    except FileNotFoundError:
        parent = path.parent.stat()
        uid, gid, mode = parent.st_uid, parent.st_gid, 0o600
    fd, tmp = tempfile.mkstemp(prefix=".users-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
            fh.write("\n")
        if os.geteuid() == 0:
            os.chown(tmp, uid, gid)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_user(path: str | os.PathLike[str], name: str, role: Role | str, password: str, *,
             replace: bool = False) -> UserRecord:
    """Add (or with ``replace`` update) one user; creates the file if needed."""
    path = Path(path)
    validate_name(name)
    try:
        role = Role(str(role))
    except ValueError:
        raise UsersFileError(
            f"Unknown role {role!r}; use owner, collaborator or third_party."
        ) from None
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UsersFileError(f"The password must have at least {MIN_PASSWORD_LENGTH} characters.")
    users = load_users(path) if path.exists() else {}
    if name in users and not replace:
        raise UsersFileError(f"User '{name}' already exists in {path}; pass --replace to update.")
    record = UserRecord(name, role, generate_password_hash(password))
    users[name] = record
    _write_users(path, users)
    return record


def remove_user(path: str | os.PathLike[str], name: str) -> None:
    """Delete one user; their open sessions stop working on their next request."""
    path = Path(path)
    users = load_users(path)
    if users.pop(name, None) is None:
        raise UsersFileError(f"No user '{name}' in {path}.")
    _write_users(path, users)


class UserStore:
    """Thread-safe view of the users file, re-read whenever its modification stamp changes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, UserRecord] = {}
        self._refresh()

    def _refresh(self) -> dict[str, UserRecord]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            load_users(self.path)  # raises the UsersFileError that says how to create it
            raise
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._users = load_users(self.path)
                self._stamp = stamp
            return self._users

    def __len__(self) -> int:
        return len(self._users)

    def get(self, name: str) -> UserRecord | None:
        """The current record for ``name``; None if unknown or the file became unreadable."""
        try:
            return self._refresh().get(name)
        except (OSError, UsersFileError):
            return None  # fail closed: nobody is logged in while the file is broken

    def verify(self, name: str, password: str) -> UserRecord | None:
        """The user if the password matches, else None (same cost for unknown names)."""
        user = self.get(name) if isinstance(name, str) else None
        ok = check_password_hash(user.password_hash if user else _dummy_hash(), password or "")
        return user if (user is not None and ok) else None
