"""One SQLAlchemy engine for the identity tables, safe for several threads and worker processes.

SQLite: WAL, a long busy timeout and ``BEGIN IMMEDIATE`` for writes, so two workers updating
the same throttle row wait for each other instead of failing. PostgreSQL: row locks
(``SELECT ... FOR UPDATE``) in the callers and an advisory lock around ``CREATE TABLE``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url

from services.database import SCHEMA_NAME, base_engine, insert_ignore, is_memory
from services.identity.tables import metadata

_DDL_LOCK = 0x1D3A71  # PostgreSQL advisory-lock key serializing CREATE TABLE
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
        if schema is not None and (self.dialect != "postgresql" or not SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema {schema!r}: a plain identifier, PostgreSQL only.")
        self._memory = is_memory(parsed)
        self._lock = threading.RLock()
        base = base_engine(parsed, write_option="identity_write")
        self._base = base
        self.engine: Engine = (base.execution_options(schema_translate_map={None: schema})
                               if schema else base)
        self.schema = schema
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
        return insert_ignore(self.dialect, table, **values)

    def close(self) -> None:
        self._base.dispose()
