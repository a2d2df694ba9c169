"""The ledger's database: engine set-up, transactions and the SQLite writer queue.

SQLite (a file, embedded) or PostgreSQL (several workers share one ledger). A write transaction
takes SQLite's write lock up front (``BEGIN IMMEDIATE``), queued on a file lock so waiting
writers are woken at once instead of polling; on PostgreSQL writers serialize on row locks
(the door's locking upserts, services/ledger/sql.py).
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, create_engine, event
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import StaticPool

try:
    import fcntl
except ImportError:  # not on Windows: SQLite's own busy timeout still serializes writers
    fcntl = None  # type: ignore[assignment]

SQLITE_BUSY_MS = 30_000
SQLITE_RETRIES = 3
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


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
        if schema is not None and (self.dialect != "postgresql" or not _SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema {schema!r}: a plain identifier, PostgreSQL only.")
        self.schema = schema
        self._lock_path: str | None = None
        self._thread_lock = threading.RLock()
        self._memory = False
        if self.dialect == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                if fcntl is not None:
                    self._lock_path = parsed.database + ".writer-lock"
            self._memory = not parsed.database or parsed.database == ":memory:"
            if self._memory:  # one shared connection, or each thread would see its own database
                base = create_engine(parsed, poolclass=StaticPool,
                                     connect_args={"check_same_thread": False})
            else:
                base = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_MS / 1000})
            _configure_sqlite(base)
        else:
            base = create_engine(parsed, pool_pre_ping=True)
        self.base_engine = base
        self.engine = (base.execution_options(schema_translate_map={None: schema})
                       if schema else base)
        _dispose_after_fork(base)

    def close(self) -> None:
        self.base_engine.dispose()

    @contextmanager
    def tx(self, *, write: bool) -> Iterator[Connection]:
        """One transaction. ``write``: queued writer (SQLite: file lock + BEGIN IMMEDIATE)."""
        # in-memory SQLite: one connection for all threads, so one transaction at a time
        guard = self._thread_lock if self._memory else nullcontext()
        lock = self._write_lock() if write else nullcontext()
        with guard, lock, self.engine.connect().execution_options(ledger_write=write) as conn, \
                conn.begin():
            yield conn

    def retrying(self, attempt: int, exc: OperationalError) -> bool:
        """Should a transaction that failed with ``exc`` be tried again (SQLite busy)?"""
        return (self.dialect == "sqlite" and "locked" in str(exc).lower()
                and attempt < SQLITE_RETRIES - 1)

    def insert_ignore(self, table: Table, **values: Any):
        """INSERT ... ON CONFLICT DO NOTHING."""
        ins = pg_insert if self.dialect == "postgresql" else sqlite_insert
        return ins(table).values(**values).on_conflict_do_nothing()

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


def _configure_sqlite(engine) -> None:
    """WAL (readers never block the writer), a long busy timeout, and explicit BEGIN modes."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # let the "begin" hook below emit BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        write = conn.get_execution_options().get("ledger_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _dispose_after_fork(engine) -> None:
    """A forked child must not reuse the parent's pooled connections."""
    ref = weakref.ref(engine)

    def _child() -> None:
        eng = ref()
        if eng is not None:
            eng.dispose(close=False)

    os.register_at_fork(after_in_child=_child)
