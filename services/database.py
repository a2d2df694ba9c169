"""What the app's SQL stores (the ledger, the identity tables) share: one way to open SQLite
or PostgreSQL, SQLite's locking hooks, pools dropped after fork, INSERT-or-ignore."""

from __future__ import annotations

import os
import re
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Table, create_engine, event
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL
from sqlalchemy.pool import StaticPool

SQLITE_BUSY_MS = 30_000
SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
"""A PostgreSQL schema name the stores accept (a plain identifier)."""


def is_memory(parsed: URL) -> bool:
    return parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:")


def base_engine(parsed: URL, *, write_option: str) -> Engine:
    """An engine for ``parsed``. SQLite: WAL, a long busy timeout, and BEGIN IMMEDIATE for
    connections whose execution option ``write_option`` is true; in memory, one connection
    shared by every thread (or each would see its own database). PostgreSQL: pre-ping."""
    if parsed.get_backend_name() != "sqlite":
        engine = create_engine(parsed, pool_pre_ping=True)
    elif is_memory(parsed):
        engine = create_engine(parsed, poolclass=StaticPool,
                               connect_args={"check_same_thread": False})
    else:
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_MS / 1000})
    if parsed.get_backend_name() == "sqlite":
        _configure_sqlite(engine, write_option)
    _dispose_after_fork(engine)
    return engine


def _configure_sqlite(engine: Engine, write_option: str) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # let the "begin" hook below emit BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        write = conn.get_execution_options().get(write_option, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _dispose_after_fork(engine: Engine) -> None:
    """A forked child must not reuse the parent's pooled connections."""
    ref = weakref.ref(engine)

    def _child() -> None:
        eng = ref()
        if eng is not None:
            eng.dispose(close=False)

    os.register_at_fork(after_in_child=_child)


def insert_ignore(dialect: str, table: Table, **values: Any):
    """INSERT ... ON CONFLICT DO NOTHING (both dialects)."""
    ins = pg_insert if dialect == "postgresql" else sqlite_insert
    return ins(table).values(**values).on_conflict_do_nothing()
