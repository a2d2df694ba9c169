"""The ledger's database: engine set-up, transactions and the SQLite writer queue.

SQLite (a file, embedded) or PostgreSQL (several workers share one ledger). A write transaction
takes SQLite's write lock up front (``BEGIN IMMEDIATE``), queued on a file lock so waiting
writers are woken at once instead of polling; on PostgreSQL writers serialize on row locks
(the door's locking upserts, services/ledger/sql.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from services import priority
from services.database import SCHEMA_NAME, base_engine, insert_ignore, is_memory

try:
    import fcntl
except ImportError:  # not on Windows: SQLite's own busy timeout still serializes writers
    fcntl = None  # type: ignore[assignment]

SQLITE_RETRIES = 3


def now() -> datetime:
    """The ledger's clock (UTC); tests move it to check renewals."""
    return datetime.now(UTC)


def aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Database:
    """One ledger database: SQLAlchemy engine, transactions, dialect-specific statements."""

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        """``schema`` (PostgreSQL only) keeps the tables in their own schema; tests use it."""
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"The ledger supports SQLite and PostgreSQL URLs, got '{url}'.")
        if schema is not None and (self.dialect != "postgresql" or not SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema {schema!r}: a plain identifier, PostgreSQL only.")
        self.schema = schema
        self._lock_path: str | None = None
        self._thread_lock = threading.RLock()
        self._memory = is_memory(parsed)
        base = base_engine(parsed, write_option="ledger_write")
        if self.dialect == "sqlite" and not self._memory and fcntl is not None:
            self._lock_path = parsed.database + ".writer-lock"
        self.base_engine = base
        self.engine = (base.execution_options(schema_translate_map={None: schema})
                       if schema else base)

    def close(self) -> None:
        self.base_engine.dispose()

    @contextmanager
    def tx(self, *, write: bool) -> Iterator[Connection]:
        """One transaction. ``write``: queued writer (SQLite: file lock + BEGIN IMMEDIATE)."""
        # in-memory SQLite: one connection for all threads, so one transaction at a time
        guard = self._thread_lock if self._memory else nullcontext()
        lock = self._write_lock() if write else nullcontext()
        held = priority.ceiling() if write else nullcontext()   # a niced child holds the
        with held, guard, lock, \
                self.engine.connect().execution_options(ledger_write=write) as conn, \
                conn.begin():                                   # lock at full priority
            yield conn

    def retrying(self, attempt: int, exc: OperationalError) -> bool:
        """Should a transaction that failed with ``exc`` be tried again (SQLite busy)?"""
        return (self.dialect == "sqlite" and "locked" in str(exc).lower()
                and attempt < SQLITE_RETRIES - 1)

    def insert_ignore(self, table: Table, **values: Any):
        """INSERT ... ON CONFLICT DO NOTHING."""
        return insert_ignore(self.dialect, table, **values)

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        """SQLite: queue writers on a file lock (woken at once) instead of busy-wait polling."""
        if self.dialect != "sqlite":
            yield
            return
        with self._thread_lock:
            if self._lock_path is None:
                yield
                return
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the lock; a killed process releases it too


