"""SQL tables of the identity service: server-side sessions, login throttle, failed logins.

They live in the ledger's database (SQLite by default, PostgreSQL with ``DATABASE_URL``), so
every gunicorn worker sees the same sessions and the same throttle. Times are epoch seconds
(floats): the checks compare them with ``time.time()`` and need no time-zone handling.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table

metadata = MetaData()

sessions = Table(
    "auth_sessions", metadata,
    Column("sid_hash", String(64), primary_key=True),   # SHA-256 of the cookie's session id
    Column("user_name", String(64), nullable=False),
    Column("pw_fingerprint", String(32), nullable=False),  # password the session was issued for
    Column("csrf", String(64), nullable=False),          # token for POST forms (logout)
    Column("created_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Index("ix_auth_sessions_user", "user_name"),
)

throttle = Table(
    "auth_throttle", metadata,
    Column("key", String(200), primary_key=True),        # "account:NAME" or "client:ADDRESS"
    Column("failures", Integer, nullable=False),
    Column("last_failure", Float, nullable=False),
    Column("blocked_until", Float, nullable=False),
)

failed_logins = Table(
    "auth_failed_logins", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("user_name", String(64), nullable=False),     # as typed, cut to 64 characters
    Column("client", String(64), nullable=False),
    Column("reason", String(64), nullable=False),
    Index("ix_auth_failed_logins_at", "at"),
)
