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
from request data. The login and logout views are in ``callbacks/login.py``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import flask
import flask_login
from flask import current_app, has_request_context, redirect, request, session
from flask.sessions import SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

from services.identity.db import MEMORY_URL, IdentityDB
from services.identity.headers import install_security_headers
from services.identity.limits import BodyLimits, install_body_limits
from services.identity.roles import Role
from services.identity.sessions import SessionPolicy, SessionStore
from services.identity.throttle import LoginThrottle, ThrottlePolicy
from services.identity.users import UserRecord, UsersFileError, UserStore

EMBEDDED_USER = "local-owner"
EXTENSION = "cohort_identity"
LOGIN_ENDPOINT = "cohort_login"
LOGOUT_ENDPOINT = "cohort_logout"
FAVICON_ENDPOINT = "cohort_favicon"
HEALTH_ENDPOINT = "cohort_health"
PUBLIC_ENDPOINTS = (LOGIN_ENDPOINT, LOGOUT_ENDPOINT, FAVICON_ENDPOINT, FAVICON_ENDPOINT + "_ico",
                    HEALTH_ENDPOINT)
"""Routes served without a session: sign-in, sign-out, the product's icon and the health check
(services/ops/health.py), which reveals nothing but the database's state."""
COOKIE_NAME = "cohort_session"
log = logging.getLogger(__name__)
_MIN_SECRET_LEN = 16
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
_PROXY_HEADERS = ("X-Forwarded-For", "X-Real-IP", "Forwarded", "X-Forwarded-Host")

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


@dataclass
class AuthState:
    """The identity layer of one server: mode, users, sessions, throttle."""

    embedded: bool
    settings: AuthSettings
    store: UserStore | None = None
    db: IdentityDB | None = None
    sessions: SessionStore | None = None
    throttle: LoginThrottle | None = None


def auth_state(server: flask.Flask | None = None) -> AuthState | None:
    app = server or (current_app if has_request_context() else None)
    return app.extensions.get(EXTENSION) if app is not None else None


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


# -- the identity of the current request -------------------------------------------------------

class SessionUser(flask_login.UserMixin):
    """Flask-Login's user: the account plus the server-side session it is signed in with."""

    def __init__(self, record: UserRecord, sid: str, csrf: str) -> None:
        self.record, self.sid, self.csrf = record, sid, csrf

    def get_id(self) -> str:
        return self.sid


def fingerprint(pw_hash: str) -> str:
    """Names the password a session was issued for; a new password voids the session."""
    return hashlib.sha256(pw_hash.encode()).hexdigest()[:16]


def current_identity() -> Identity:
    """The identity of the current request, from the server session or the embedded owner."""
    state = auth_state()
    if state is None:
        return ANONYMOUS
    if state.embedded:
        return LOCAL_OWNER
    user = flask_login.current_user
    if user is not None and user.is_authenticated:
        return Identity(user.record.name, user.record.role, True)
    return ANONYMOUS


def logout_token() -> str | None:
    """The CSRF token the logout form must send; None when there is nobody to log out."""
    state = auth_state()
    if state is None or state.embedded:
        return None
    user = flask_login.current_user
    return user.csrf if user is not None and user.is_authenticated else None


def cookie_secure(settings: AuthSettings) -> bool:
    """Whether this response's cookie is Secure: as configured, else off loopback only."""
    if settings.cookie_secure is not None:
        return bool(settings.cookie_secure)
    if not has_request_context():
        return True
    return request.is_secure or not is_loopback(host_name(request.host or ""))


class _CookieSessions(SecureCookieSessionInterface):
    """Flask's signed cookie, Secure decided per request (see ``cookie_secure``)."""

    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings

    def get_cookie_secure(self, app: flask.Flask) -> bool:
        return cookie_secure(self.settings)


# -- wiring ------------------------------------------------------------------------------------

def init_auth(server: flask.Flask, config: Mapping[str, Any], *,
              script_hashes: Callable[[], Sequence[str]] | None = None) -> AuthState:
    """Install headers, body limits and the embedded-mode guard, or sessions and the guard.

    The login and logout routes are added by ``callbacks.login.register``. Raises
    AuthConfigError when users are configured without a usable SECRET_KEY or users file.
    """
    settings = AuthSettings.from_mapping(config)
    install_security_headers(server, hsts_seconds=settings.hsts_seconds,
                             script_hashes=script_hashes)
    limit_body = install_body_limits(server, settings.limits, current_identity)
    if not settings.users_file:
        if settings.proxy_count:
            raise AuthConfigError("A reverse proxy (PROXY_COUNT) needs users configured. "
                                  + HOW_TO_CONFIGURE)
        state = AuthState(embedded=True, settings=settings)
        server.extensions[EXTENSION] = state
        _hooks_first(server, limit_body, _embedded_guard)
        return state

    secret = settings.secret_key
    if not secret or len(str(secret)) < _MIN_SECRET_LEN:
        raise AuthConfigError(
            "Users are configured but SECRET_KEY is missing or shorter than "
            f"{_MIN_SECRET_LEN} characters. Set it in the environment, e.g. "
            "SECRET_KEY=$(python -c 'import secrets; print(secrets.token_hex(32))')."
        )
    try:
        store = UserStore(settings.users_file)
    except (OSError, UsersFileError) as exc:
        raise AuthConfigError(f"Cannot load users: {exc}") from None
    if len(store) == 0:
        raise AuthConfigError(f"The users file {store.path} lists no users. " + HOW_TO_CONFIGURE)

    db = IdentityDB(settings.database_url)
    state = AuthState(False, settings, store, db, SessionStore(db, settings.session),
                      LoginThrottle(db, settings.throttle))
    server.secret_key = str(secret)
    server.session_interface = _CookieSessions(settings)
    server.config.update(
        SESSION_COOKIE_NAME=COOKIE_NAME,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE=settings.cookie_samesite,
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session.absolute_s),
        REMEMBER_COOKIE_DURATION=timedelta(seconds=0),
    )
    if settings.proxy_count:
        n = settings.proxy_count
        server.wsgi_app = ProxyFix(server.wsgi_app, x_for=n, x_proto=n, x_host=n, x_port=n)
    server.extensions[EXTENSION] = state

    manager = flask_login.LoginManager()
    manager.session_protection = "strong"
    manager.init_app(server)
    manager.user_loader(lambda sid: load_session_user(state, sid))
    _hooks_first(server, limit_body, _session_guard)
    return state


def load_session_user(state: AuthState, sid: str) -> SessionUser | None:
    """The signed-in user for a cookie's session id, if the session is live in the database."""
    live = state.sessions.check(str(sid))
    if live is None:
        return None
    record = state.store.get(live.user)
    if record is None or not secrets.compare_digest(live.pw_fingerprint,
                                                    fingerprint(record.password_hash)):
        state.sessions.revoke(str(sid))  # removed user or changed password
        return None
    return SessionUser(record, str(sid), live.csrf)


def start_session(state: AuthState, record: UserRecord) -> None:
    """Sign ``record`` in with a fresh server-side session (no session fixation)."""
    session.clear()
    sid = state.sessions.create(record.name, fingerprint(record.password_hash))
    live = state.sessions.check(sid)
    flask_login.login_user(SessionUser(record, sid, live.csrf if live else ""))
    session.permanent = True
    log.info("Signed in: %s (%s) from %s.", record.name, record.role.value, request.remote_addr)


def end_session(state: AuthState) -> None:
    """Revoke the current session on the server and clear the cookie."""
    user = flask_login.current_user
    if user is not None and user.is_authenticated:
        state.sessions.revoke(user.sid)
        log.info("Signed out: %s from %s.", user.record.name, request.remote_addr)
    flask_login.logout_user()
    session.clear()


def _hooks_first(server: flask.Flask, *hooks) -> None:
    """Run ``hooks`` in this order before any other before-request hook (Dash's included)."""
    server.before_request_funcs.setdefault(None, [])[0:0] = list(hooks)


def _embedded_guard():
    """Embedded mode serves the machine it runs on only (no proxy, no DNS-rebinding host)."""
    relayed = any(h in request.headers for h in _PROXY_HEADERS)
    if relayed or not is_loopback(request.remote_addr) \
            or not is_loopback(host_name(request.host or "")):
        return flask.Response(
            "This dashboard runs in embedded mode (one local owner, no login) and only answers "
            "requests from this machine. " + HOW_TO_CONFIGURE + "\n",
            status=403, mimetype="text/plain")
    return None


def _wants_page() -> bool:
    """A browser navigating to a page (gets a redirect); everything else gets a 401."""
    if request.method != "GET" or "/_dash-" in request.path or "/assets/" in request.path:
        return False
    return "text/html" in request.headers.get("Accept", "")


def _session_guard():
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    if flask_login.current_user.is_authenticated:
        return None
    if _wants_page():
        return redirect(flask.url_for(LOGIN_ENDPOINT, next=request.full_path.rstrip("?")))
    response = flask.jsonify(error="Login required.", login=flask.url_for(LOGIN_ENDPOINT))
    response.status_code = 401
    response.headers["WWW-Authenticate"] = 'Session realm="cohort-explorer"'
    return response
