"""Who is asking: the embedded local owner, or a logged-in user with a server-side session.

Two modes, chosen by configuration:

- **embedded** (no users file): one local owner, no login. Only loopback clients are served,
  requests relayed by a proxy are refused, and the server refuses to bind a public address.
- **users** (``USERS_FILE`` set): Flask-Login over a signed cookie that holds a random session
  id; the session itself lives in SQL (``services.identity.sessions``), so logout, a password
  change and the idle / absolute timeouts end it on every worker at once. Hooks run before
  every route — pages, ``/_dash-*`` endpoints and assets: first the body limit for the
  session's role (413 before anything reads the body), then the guard (401 for API calls, a
  redirect to ``/login`` for page navigations).

The identity always comes from the server side (the session or the embedded owner), never
from request data. This module is the part without a web framework (who a requester is, the
settings, the bind check the command line uses too); the Flask hooks that read the session
are ``callbacks/server/auth.py``, the login and logout views ``callbacks/login.py``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.identity.db import MEMORY_URL
from services.identity.limits import BodyLimits
from services.identity.roles import Role
from services.identity.sessions import SessionPolicy
from services.identity.throttle import ThrottlePolicy

EMBEDDED_USER = "local-owner"
EXTENSION = "cohort_identity"
LOGIN_ENDPOINT = "cohort_login"
LOGOUT_ENDPOINT = "cohort_logout"
FAVICON_ENDPOINT = "cohort_favicon"
HEALTH_ENDPOINT = "cohort_health"
PUBLIC_ENDPOINTS = (LOGIN_ENDPOINT, LOGOUT_ENDPOINT, FAVICON_ENDPOINT, FAVICON_ENDPOINT + "_ico",
                    HEALTH_ENDPOINT)
"""Routes served without a session: sign-in, sign-out, the product's icon and the health check
(``app.install_health``), which reveals nothing but the database's state."""
COOKIE_NAME = "cohort_session"
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
PROXY_HEADERS = ("X-Forwarded-For", "X-Real-IP", "Forwarded", "X-Forwarded-Host")

HOW_TO_CONFIGURE = (
    "To share the dashboard, configure users: "
    "`cohort-explorer add-user NAME --role owner|collaborator|third_party`, then start with "
    "COHORT_USERS_FILE=<that file> and SECRET_KEY=<a long random string> in the environment."
)


class AuthConfigError(RuntimeError):
    """The server must not start with this configuration."""


@dataclass(frozen=True)
class Identity:
    """The requester as the server knows it. ``authenticated`` False means: refuse."""

    user: str
    role: Role
    authenticated: bool


ANONYMOUS = Identity("anonymous", Role.THIRD_PARTY, False)
LOCAL_OWNER = Identity(EMBEDDED_USER, Role.OWNER, True)


@dataclass(frozen=True)
class AuthSettings:
    """Everything the identity layer reads from configuration (see ``from_mapping``)."""

    users_file: str | None = None
    secret_key: str | None = None
    database_url: str = MEMORY_URL
    session: SessionPolicy = SessionPolicy()
    throttle: ThrottlePolicy = ThrottlePolicy()
    limits: BodyLimits = BodyLimits()
    cookie_secure: bool | None = None   # None: Secure unless the request is on loopback
    cookie_samesite: str = "Lax"
    proxy_count: int = 0
    hsts_seconds: int = 31_536_000

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> AuthSettings:
        """Flask-style keys (``AppConfig.as_mapping``); anything missing keeps its default."""
        c, d = dict(config or {}), cls()
        t, s = d.throttle, d.session
        return cls(
            users_file=c.get("USERS_FILE") or None,
            secret_key=c.get("SECRET_KEY") or os.environ.get("SECRET_KEY") or None,
            database_url=c.get("DATABASE_URL") or MEMORY_URL,
            session=SessionPolicy(
                idle_s=float(c.get("SESSION_IDLE_MINUTES", s.idle_s / 60)) * 60,
                absolute_s=float(c.get("SESSION_MAX_HOURS", s.absolute_s / 3600)) * 3600),
            throttle=ThrottlePolicy(
                account_failures=int(c.get("LOGIN_MAX_FAILURES", t.account_failures)),
                client_failures=int(c.get("LOGIN_CLIENT_MAX_FAILURES", t.client_failures)),
                backoff_s=float(c.get("LOGIN_BACKOFF_SECONDS", t.backoff_s)),
                backoff_max_s=float(c.get("LOGIN_BACKOFF_MAX_SECONDS", t.backoff_max_s))),
            limits=c.get("BODY_LIMITS") or d.limits,
            cookie_secure=c.get("SESSION_COOKIE_SECURE"),
            cookie_samesite=str(c.get("SESSION_COOKIE_SAMESITE") or d.cookie_samesite),
            proxy_count=int(c.get("PROXY_COUNT") or 0),
            hsts_seconds=int(c.get("HSTS_SECONDS", d.hsts_seconds)),
        )


# -- loopback checks ---------------------------------------------------------------------------

def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 (also IPv4-mapped) and the name 'localhost'."""
    if not host:
        return False
    host = host.strip().strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def host_name(host_header: str) -> str:
    """'localhost:8050' -> 'localhost', '[::1]:8050' -> '::1'."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def users_configured(config: Mapping[str, Any]) -> bool:
    return bool(config.get("USERS_FILE"))


def assert_bind_allowed(host: str, config: Mapping[str, Any]) -> None:
    """Refuse to listen on a non-loopback address in embedded mode (no users configured)."""
    if users_configured(config) or is_loopback(host):
        return
    raise AuthConfigError(
        f"Refusing to listen on '{host}': no users are configured, so this server runs as a "
        "single local owner with no login and may only listen on 127.0.0.1 / localhost. "
        + HOW_TO_CONFIGURE
    )


def fingerprint(pw_hash: str) -> str:
    """Names the password a session was issued for; a new password voids the session."""
    return hashlib.sha256(pw_hash.encode()).hexdigest()[:16]
