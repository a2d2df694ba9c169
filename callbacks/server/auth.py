"""The identity layer's Flask side: sessions, the guard and the hooks of every request.

Who a requester is and the settings are ``services.identity.session`` (no web framework);
this module installs them on a Flask server (security headers, body limits per role checked
from Content-Length before anything reads a body, the embedded-mode guard or Flask-Login
sessions stored in SQL) and reads the current request's identity.
"""

from __future__ import annotations

import logging
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

from callbacks.server.headers import install_security_headers
from services.config import MIN_SECRET_LEN
from services.identity.db import IdentityDB
from services.identity.limits import UPDATE_PATH, BodyLimits
from services.identity.roles import Role
from services.identity.session import (
    ANONYMOUS,
    COOKIE_NAME,
    EXTENSION,
    HOW_TO_CONFIGURE,
    LOCAL_OWNER,
    LOGIN_ENDPOINT,
    PROXY_HEADERS,
    PUBLIC_ENDPOINTS,
    AuthConfigError,
    AuthSettings,
    Identity,
    fingerprint,
    host_name,
    is_loopback,
)
from services.identity.sessions import SessionStore
from services.identity.throttle import LoginThrottle
from services.identity.users import UserRecord, UsersFileError, UserStore

log = logging.getLogger(__name__)


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


# -- the identity of the current request ----------------------------------------------------

class SessionUser(flask_login.UserMixin):
    """Flask-Login's user: the account plus the server-side session it is signed in with."""

    def __init__(self, record: UserRecord, sid: str, csrf: str) -> None:
        self.record, self.sid, self.csrf = record, sid, csrf

    def get_id(self) -> str:
        return self.sid


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
    if not secret or len(str(secret)) < MIN_SECRET_LEN:
        raise AuthConfigError(
            f"Users are configured but SECRET_KEY is missing or shorter than {MIN_SECRET_LEN} "
            "characters. Set it in the environment, e.g. "
            "SECRET_KEY=$(python -c 'import secrets; print(secrets.token_hex(32))').")
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
    server.config.update(SESSION_COOKIE_NAME=COOKIE_NAME, SESSION_COOKIE_HTTPONLY=True,
                         SESSION_COOKIE_SAMESITE=settings.cookie_samesite,
                         PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session.absolute_s),
                         REMEMBER_COOKIE_DURATION=timedelta(seconds=0))
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


def install_body_limits(server: flask.Flask, limits: BodyLimits,
                        identity: Callable[[], object]) -> Callable[[], flask.Response | None]:
    """Set MAX_CONTENT_LENGTH; return the hook that refuses oversized bodies (413, 411).

    ``identity()`` returns an object with ``authenticated`` and ``role`` (from the session).
    The caller decides where the hook runs (first, before any other hook).
    """
    server.config["MAX_CONTENT_LENGTH"] = limits.largest

    def _limit_body() -> flask.Response | None:
        who = identity()
        limit = limits.limit(bool(getattr(who, "authenticated", False)),
                             getattr(who, "role", Role.THIRD_PARTY), request.path)
        request.max_content_length = limit
        length = request.content_length
        if request.headers.get("Transfer-Encoding", "identity").lower() != "identity":
            status = 411
            text = "A request body must state its length (Content-Length). Nothing was read."
        elif length is None or length <= limit:
            return None
        else:
            status = 413
            text = (f"This request is {length / 1e6:.1f} MB; at most {limit / 1e6:.2f} MB is "
                    "accepted here for your role. Nothing was read or changed.")
        if request.path.endswith(UPDATE_PATH):
            response = flask.jsonify(message=text)
        else:
            response = flask.Response(text + "\n", mimetype="text/plain")
        response.status_code = status
        response.headers["Connection"] = "close"  # the unread body is not ours to drain
        return response

    return _limit_body


def _hooks_first(server: flask.Flask, *hooks) -> None:
    """Run ``hooks`` in this order before any other before-request hook (Dash's included)."""
    server.before_request_funcs.setdefault(None, [])[0:0] = list(hooks)


def _embedded_guard():
    """Embedded mode serves the machine it runs on only (no proxy, no DNS-rebinding host)."""
    relayed = any(h in request.headers for h in PROXY_HEADERS)
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


class IdentityService:
    """What callbacks hold as ``services.identity``: the identity of the server session."""

    def current(self) -> Identity:
        return current_identity()


def user_role(name: str) -> Role | None:
    """The role of a configured user (users mode), else None: a page's named audience."""
    state = auth_state()
    record = state.store.get(name) if state is not None and state.store is not None else None
    return None if record is None else record.role
