"""Login throttle shared by every worker (in SQL), per account and per client, with backoff.

After ``account_failures`` failed logins for one account (or ``client_failures`` from one
client address), further attempts wait ``backoff_s``, doubling with each failure after that,
never more than ``backoff_max_s``: a user is slowed, never locked out for good. Failures are
forgotten ``forget_after_s`` after the last one; a successful login clears the account's count
(not the client's, so one valid account cannot reset a guesser's address). Every failure is
written to an audit table the owner reads with ``cohort-explorer failed-logins``.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select, update

from services.identity.db import IdentityDB
from services.identity.tables import failed_logins as _F
from services.identity.tables import throttle as _T

NAME_CHARS = 64
log = logging.getLogger(__name__)
clock = time.time  # seconds since the epoch; tests replace it to move time


@dataclass(frozen=True)
class ThrottlePolicy:
    """How many failures are free, and how long the backoff after them lasts (seconds)."""

    account_failures: int = 5
    client_failures: int = 20
    backoff_s: float = 30.0
    backoff_max_s: float = 900.0
    forget_after_s: float = 3600.0
    audit_days: float = 90.0

    def __post_init__(self) -> None:
        if min(self.account_failures, self.client_failures) < 1:
            raise ValueError("The login throttle needs at least one free attempt.")
        if not 0 < self.backoff_s <= self.backoff_max_s:
            raise ValueError("Login backoff: 0 < backoff_s <= backoff_max_s.")

    def delay(self, failures: int, threshold: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures."""
        if failures < threshold:
            return 0.0
        return min(self.backoff_s * 2.0 ** min(failures - threshold, 40), self.backoff_max_s)


@dataclass(frozen=True)
class FailedLogin:
    """One audit row."""

    at: datetime
    user: str
    client: str
    reason: str


def client_key(addr: str | None) -> str:
    """The client part of the throttle key: the address, IPv6 grouped by its /64 network."""
    text = (addr or "unknown").strip()
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return text[:NAME_CHARS]
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False))


class LoginThrottle:
    """Failed-login counters and the audit log, in the identity database."""

    def __init__(self, db: IdentityDB, policy: ThrottlePolicy | None = None) -> None:
        self.db = db
        self.policy = policy or ThrottlePolicy()

    def _keys(self, account: str, client: str) -> list[tuple[str, int]]:
        return [(f"account:{str(account)[:NAME_CHARS]}", self.policy.account_failures),
                (f"client:{client_key(client)}", self.policy.client_failures)]

    def wait_s(self, account: str, client: str, *, now: float | None = None) -> float:
        """Seconds before this account may try again from this client (0: go ahead)."""
        now = clock() if now is None else now
        keys = [k for k, _ in self._keys(account, client)]
        with self.db.tx(write=False) as conn:
            until = conn.execute(select(_T.c.blocked_until).where(_T.c.key.in_(keys))).scalars()
            return max([0.0, *(u - now for u in until)])

    def record_failure(self, account: str, client: str, reason: str, *,
                       now: float | None = None) -> float:
        """Count one failure for the account and the client; returns the wait now in force."""
        now = clock() if now is None else now
        wait = 0.0
        with self.db.tx(write=True) as conn:
            for key, threshold in self._keys(account, client):
                conn.execute(self.db.insert_ignore(_T, key=key, failures=0, last_failure=now,
                                                   blocked_until=0.0))
                row = conn.execute(select(_T).where(_T.c.key == key).with_for_update()).one()
                fresh = now - row.last_failure > self.policy.forget_after_s
                failures = 1 if fresh else row.failures + 1
                until = now + self.policy.delay(failures, threshold)
                conn.execute(update(_T).where(_T.c.key == key).values(
                    failures=failures, last_failure=now, blocked_until=until))
                wait = max(wait, until - now)
            self._audit(conn, account, client, reason, now)
        return wait

    def record_refusal(self, account: str, client: str, reason: str, *,
                       now: float | None = None) -> None:
        """Audit an attempt refused before the password was checked (counts nothing)."""
        now = clock() if now is None else now
        with self.db.tx(write=True) as conn:
            self._audit(conn, account, client, reason, now)

    def record_success(self, account: str) -> None:
        """The account's failures are forgotten; the client's count stays."""
        key = self._keys(account, "")[0][0]
        with self.db.tx(write=True) as conn:
            conn.execute(delete(_T).where(_T.c.key == key))

    def failed_logins(self, *, limit: int | None = 200) -> list[FailedLogin]:
        """The audit log, newest first."""
        stmt = select(_F).order_by(_F.c.at.desc(), _F.c.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        with self.db.tx(write=False) as conn:
            return [FailedLogin(datetime.fromtimestamp(r.at, UTC), r.user_name, r.client,
                                r.reason) for r in conn.execute(stmt)]

    def _audit(self, conn, account: str, client: str, reason: str, now: float) -> None:
        # the log names the client and the reason only: a name as typed may be a password
        # typed into the wrong field (the owner reads names with `failed-logins`)
        log.warning("Sign-in failed from %s: %s.", client or "unknown", reason)
        conn.execute(_F.insert().values(at=now, user_name=str(account)[:NAME_CHARS],
                                        client=str(client or "unknown")[:NAME_CHARS],
                                        reason=reason[:NAME_CHARS]))
        horizon = now - self.policy.audit_days * 86400
        conn.execute(delete(_F).where(_F.c.at < horizon))
        conn.execute(delete(_T).where(_T.c.last_failure < now - self.policy.forget_after_s,
                                      _T.c.blocked_until < now))
