"""One SQLAlchemy engine for the identity tables, safe for several threads and worker processes.

SQLite: WAL, a long busy timeout and ``BEGIN IMMEDIATE`` for writes, so two workers updating
the same throttle row wait for each other instead of failing. PostgreSQL: row locks
(``SELECT ... FOR UPDATE``) in the callers and an advisory lock around ``CREATE TABLE``.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from services.identity.tables import metadata

_BUSY_S = 30.0
_DDL_LOCK = 0x1D3A71  # PostgreSQL advisory-lock key serializing CREATE TABLE
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
MEMORY_URL = "sqlite://"


class IdentityDB:
    """The identity tables in the database at ``url`` (created if missing).

    ``schema`` (PostgreSQL only) keeps them in their own schema; tests use it for isolation.
    """

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"Sessions need a SQLite or PostgreSQL database, got '{url}'.")
        if schema is not None and (self.dialect != "postgresql" or not _SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema {schema!r}: a plain identifier, PostgreSQL only.")
        self._memory = self.dialect == "sqlite" and parsed.database in (None, "", ":memory:")
        self._lock = threading.RLock()
        if self.dialect == "sqlite":
            if self._memory:  # one connection, or each thread would see its own database
                base = create_engine(parsed, poolclass=StaticPool,
                                     connect_args={"check_same_thread": False})
            else:
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                base = create_engine(parsed, connect_args={"timeout": _BUSY_S})
            _sqlite_write_locks(base)
        else:
            base = create_engine(parsed, pool_pre_ping=True)
        self._base = base
        self.engine: Engine = (base.execution_options(schema_translate_map={None: schema})
                               if schema else base)
        self.schema = schema
        _dispose_in_child(base)
        with self.tx(write=True) as conn:
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DDL_LOCK})
                if schema:
                    conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
            metadata.create_all(conn)

    @contextmanager
    def tx(self, *, write: bool) -> Iterator[Connection]:
        """One transaction; ``write`` takes SQLite's write lock at BEGIN."""
        guard = self._lock if self._memory else nullcontext()
        with guard, self.engine.connect().execution_options(identity_write=write) as conn, \
                conn.begin():
            yield conn

    def insert_ignore(self, table, **values):
        """INSERT that does nothing when the primary key exists (both dialects)."""
        ins = pg_insert if self.dialect == "postgresql" else sqlite_insert
        return ins(table).values(**values).on_conflict_do_nothing()

    def close(self) -> None:
        self._base.dispose()


def _sqlite_write_locks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # the "begin" hook emits BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(_BUSY_S * 1000)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn) -> None:
        write = conn.get_execution_options().get("identity_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _dispose_in_child(engine: Engine) -> None:
    """A forked worker must not reuse the parent's pooled connections."""
    ref = weakref.ref(engine)

    def _child() -> None:
        eng = ref()
        if eng is not None:
            eng.dispose(close=False)

    os.register_at_fork(after_in_child=_child)
