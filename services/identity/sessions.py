"""Server-side sessions: the cookie holds a random session id, the database says if it is live.

A session ends when it is revoked (logout, ``revoke_user``), when its user's password changes,
after ``idle_s`` without a request, or ``absolute_s`` after login, whichever comes first. Only
the SHA-256 of the id is stored, so a copy of the table opens no session. Every worker
checks the same table, so a logged-out cookie is refused by all of them at once.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import delete, or_, select, update

from services.identity.db import IdentityDB
from services.identity.tables import sessions as _S

clock = time.time  # seconds since the epoch; tests replace it to move time


def _hash(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()


@dataclass(frozen=True)
class LiveSession:
    """What the server knows about a valid session."""

    user: str
    pw_fingerprint: str
    csrf: str
    created_at: float


@dataclass(frozen=True)
class SessionPolicy:
    """Idle and absolute lifetimes in seconds."""

    idle_s: float = 30 * 60.0
    absolute_s: float = 12 * 3600.0

    def __post_init__(self) -> None:
        if not (self.idle_s > 0 and self.absolute_s > 0):
            raise ValueError("Session timeouts must be positive.")

    @property
    def touch_every_s(self) -> float:
        """last_seen is written at most this often (a write per request would be wasteful)."""
        return min(60.0, self.idle_s / 10)


class SessionStore:
    """Create, check and revoke sessions in the identity database."""

    def __init__(self, db: IdentityDB, policy: SessionPolicy | None = None) -> None:
        self.db = db
        self.policy = policy or SessionPolicy()

    def create(self, user: str, pw_fingerprint: str, *, now: float | None = None) -> str:
        """A new session for ``user``; returns the id to put in the (signed) cookie."""
        now = clock() if now is None else now
        sid = secrets.token_urlsafe(32)
        with self.db.tx(write=True) as conn:
            self._prune(conn, now)
            conn.execute(_S.insert().values(
                sid_hash=_hash(sid), user_name=user, pw_fingerprint=pw_fingerprint,
                csrf=secrets.token_urlsafe(32), created_at=now, last_seen=now))
        return sid

    def check(self, sid: str, *, now: float | None = None) -> LiveSession | None:
        """The live session for ``sid``, or None (unknown, revoked, idle or too old)."""
        if not isinstance(sid, str) or not sid:
            return None
        now = clock() if now is None else now
        key = _hash(sid)
        with self.db.tx(write=False) as conn:
            row = conn.execute(select(_S).where(_S.c.sid_hash == key)).first()
        if row is None or self._expired(row.created_at, row.last_seen, now):
            return None
        if now - row.last_seen >= self.policy.touch_every_s:
            with self.db.tx(write=True) as conn:
                conn.execute(update(_S).where(_S.c.sid_hash == key).values(last_seen=now))
        return LiveSession(row.user_name, row.pw_fingerprint, row.csrf, row.created_at)

    def revoke(self, sid: str) -> None:
        """End one session (logout)."""
        with self.db.tx(write=True) as conn:
            conn.execute(delete(_S).where(_S.c.sid_hash == _hash(str(sid))))

    def revoke_user(self, user: str) -> int:
        """End every session of ``user`` (password change, removal); returns how many."""
        with self.db.tx(write=True) as conn:
            return conn.execute(delete(_S).where(_S.c.user_name == user)).rowcount or 0

    def count(self, user: str | None = None) -> int:
        """Sessions stored (live or not yet pruned), for ``user`` or in all."""
        stmt = select(_S.c.sid_hash)
        if user is not None:
            stmt = stmt.where(_S.c.user_name == user)
        with self.db.tx(write=False) as conn:
            return len(conn.execute(stmt).all())

    def _expired(self, created_at: float, last_seen: float, now: float) -> bool:
        return (now - last_seen > self.policy.idle_s
                or now - created_at > self.policy.absolute_s)

    def _prune(self, conn, now: float) -> None:
        conn.execute(delete(_S).where(or_(_S.c.last_seen < now - self.policy.idle_s,
                                          _S.c.created_at < now - self.policy.absolute_s)))
