"""Studio runs and jobs kept as files under the app's data dir, so every worker can read them.

One run is one record: ``<root>/<user key>/<token>.json`` (its state while it runs, then what
the page shows and the report) and ``<token>.csv.gz`` (the DP table, already escaped). The
token is unguessable (128 random bits) and the folder is keyed by the signed-in user, so
another user's token finds nothing. The runner (``services.runner.jobs``) writes a job's state
and heartbeat here; a record whose heartbeat stopped reads as failed. Each user keeps the last
``KEEP_PER_USER`` records; older ones are deleted. Writes go to a temporary file then
``os.replace``: a reader in another worker sees the old record or the new one, never half.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from services.runner import jobs

KEEP_PER_USER = 5
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


def valid_token(token: object) -> bool:
    return isinstance(token, str) and bool(_TOKEN.match(token))


class RunStore:
    """Create, update and read a user's studio records (see the module doc)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _dir(self, user: str) -> Path:
        return self.root / hashlib.sha256(str(user).encode()).hexdigest()[:32]

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _put(self, user: str, token: str, record: dict[str, Any]) -> None:
        record = {**record, "updated": time.time()}
        self._write(self._dir(user) / f"{token}.json", json.dumps(record).encode())

    def new(self, user: str, kind: str, **fields: Any) -> str:
        """A queued record of ``kind``; returns its token. Prunes the user's older records."""
        token = secrets.token_hex(16)
        self._put(user, token, {**fields, "kind": kind, "state": "queued", "progress": 0.0,
                                "text": "Queued: waiting for a free worker…",
                                "started": time.time()})
        self._prune(user)
        return token

    def update(self, user: str, token: str, **fields: Any) -> dict[str, Any] | None:
        """Change a record's fields (only the job that owns it writes it); the new record."""
        current = self._read(user, token)
        if current is None:
            return None
        record = {**current, **fields}
        self._put(user, token, record)
        return record

    def request_cancel(self, user: str, token: str) -> bool:
        """Ask the job ``token`` to stop (a file of its own: its owner never overwrites it)."""
        if not valid_token(token) or self._read(user, token) is None:
            return False
        self._write(self._dir(user) / f"{token}.cancel", b"")
        return True

    def cancel_requested(self, user: str, token: str) -> bool:
        return (self._dir(user) / f"{token}.cancel").exists()

    def finish(self, user: str, token: str, result: dict[str, Any], csv: str | None) -> None:
        """The run is done: its table first, then the record that says so."""
        if csv is not None:
            self._write(self._dir(user) / f"{token}.csv.gz", gzip.compress(csv.encode()))
        self.update(user, token, state="done", progress=1.0, text="Done", result=result)

    def get(self, user: str, token: object) -> dict[str, Any] | None:
        """The user's record ``token`` (None for an unknown token or another user's)."""
        if not valid_token(token):
            return None
        record = self._read(user, str(token))
        if record and jobs.stale(record):
            record = {**record, "state": "error", "failure": jobs.DIED,
                      "text": "The run stopped: its process ended."}
        return record

    def csv(self, user: str, token: object) -> str | None:
        """The DP table of the user's finished run ``token`` as CSV text, else None."""
        if not valid_token(token):
            return None
        try:
            return gzip.decompress((self._dir(user) / f"{token}.csv.gz").read_bytes()).decode()
        except FileNotFoundError:
            return None

    def _read(self, user: str, token: str) -> dict[str, Any] | None:
        try:
            return json.loads((self._dir(user) / f"{token}.json").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def _prune(self, user: str) -> None:
        folder = self._dir(user)
        records = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in records[KEEP_PER_USER:]:
            old.unlink(missing_ok=True)
            (folder / f"{old.stem}.csv.gz").unlink(missing_ok=True)
            (folder / f"{old.stem}.cancel").unlink(missing_ok=True)
