"""Who is asking: the embedded local owner, or a logged-in user (Flask-Login session).

Two modes, chosen by configuration:

- **embedded** (no users file): one local owner, no login. Only loopback clients are served,
  requests relayed by a proxy are refused, and the server refuses to bind a public address.
- **users** (``USERS_FILE`` set): Flask-Login sessions signed with ``SECRET_KEY`` from the
  environment. A guard runs before every route — pages, ``/_dash-*`` endpoints and assets —
  and answers 401 (API calls) or a redirect to ``/login`` (page navigations).

The identity always comes from the server side (the session or the embedded owner), never
from request data.
"""

from __future__ import annotations

import hashlib
import html
import ipaddress
import os
import secrets
import threading
import time
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import flask
import flask_login
from flask import current_app, has_request_context, redirect, request, session

from services.identity.roles import Role
from services.identity.users import UserRecord, UsersFileError, UserStore

EMBEDDED_USER = "local-owner"
EXTENSION = "cohort_identity"
LOGIN_ENDPOINT = "cohort_login"
LOGOUT_ENDPOINT = "cohort_logout"
_FAILURES_ALLOWED = 10          # failed logins per client address ...
_FAILURE_WINDOW_S = 600.0       # ... within this window before answering 429
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


@dataclass
class _AuthState:
    embedded: bool
    store: UserStore | None = None


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


def _host_name(host_header: str) -> str:
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

class _SessionUser(flask_login.UserMixin):
    """Flask-Login's user object. The session id pins the password hash it was issued for."""

    def __init__(self, record: UserRecord) -> None:
        self.record = record

    def get_id(self) -> str:
        return f"{self.record.name}:{_fingerprint(self.record.password_hash)}"


def _fingerprint(pw_hash: str) -> str:
    return hashlib.sha256(pw_hash.encode()).hexdigest()[:16]


def current_identity() -> Identity:
    """The identity of the current request, from the server session or the embedded owner."""
    if not has_request_context():
        return ANONYMOUS
    state: _AuthState | None = current_app.extensions.get(EXTENSION)
    if state is None:
        return ANONYMOUS
    if state.embedded:
        return LOCAL_OWNER
    user = flask_login.current_user
    if user is not None and user.is_authenticated:
        return Identity(user.record.name, user.record.role, True)
    return ANONYMOUS


# -- wiring ------------------------------------------------------------------------------------

def init_auth(server: flask.Flask, config: Mapping[str, Any]) -> None:
    """Install the embedded-mode guard, or Flask-Login with a login page and a guard on every route.

    Raises AuthConfigError when users are configured without a usable SECRET_KEY or users file.
    """
    config = dict(config or {})
    server.after_request(_security_headers)
    if not users_configured(config):
        server.extensions[EXTENSION] = _AuthState(embedded=True)
        _guard_first(server, _embedded_guard)
        return

    secret = config.get("SECRET_KEY") or os.environ.get("SECRET_KEY")
    if not secret or len(str(secret)) < _MIN_SECRET_LEN:
        raise AuthConfigError(
            "Users are configured but SECRET_KEY is missing or shorter than "
            f"{_MIN_SECRET_LEN} characters. Set it in the environment, e.g. "
            "SECRET_KEY=$(python -c 'import secrets; print(secrets.token_hex(32))')."
        )
    try:
        store = UserStore(config["USERS_FILE"])
    except (OSError, UsersFileError) as exc:
        raise AuthConfigError(f"Cannot load users: {exc}") from None
    if len(store) == 0:
        raise AuthConfigError(f"The users file {store.path} lists no users. " + HOW_TO_CONFIGURE)

    server.secret_key = str(secret)
    server.config.update(
        SESSION_COOKIE_NAME="cohort_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=bool(config.get("SESSION_COOKIE_SECURE", False)),
        PERMANENT_SESSION_LIFETIME=timedelta(hours=float(config.get("SESSION_HOURS", 12))),
    )
    server.extensions[EXTENSION] = _AuthState(embedded=False, store=store)

    manager = flask_login.LoginManager()
    manager.session_protection = "strong"
    manager.init_app(server)

    @manager.user_loader
    def _load(user_id: str) -> _SessionUser | None:
        name, _, fingerprint = str(user_id).rpartition(":")
        record = store.get(name)
        if record is None or not secrets.compare_digest(
                fingerprint, _fingerprint(record.password_hash)):
            return None  # removed user or changed password: the old session is void
        return _SessionUser(record)

    throttle = _LoginThrottle()
    server.add_url_rule("/login", LOGIN_ENDPOINT, lambda: _login_view(store, throttle),
                        methods=["GET", "POST"])
    server.add_url_rule("/logout", LOGOUT_ENDPOINT, _logout_view, methods=["GET", "POST"])
    _guard_first(server, _session_guard)


def _guard_first(server: flask.Flask, guard) -> None:
    """Run ``guard`` before any other before-request hook (Dash's own included)."""
    server.before_request_funcs.setdefault(None, []).insert(0, guard)


def _embedded_guard():
    """Embedded mode serves the machine it runs on only (no proxy, no DNS-rebinding host)."""
    relayed = any(h in request.headers for h in _PROXY_HEADERS)
    if relayed or not is_loopback(request.remote_addr) \
            or not is_loopback(_host_name(request.host or "")):
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
    if request.endpoint in (LOGIN_ENDPOINT, LOGOUT_ENDPOINT):
        return None
    if flask_login.current_user.is_authenticated:
        return None
    if _wants_page():
        return redirect(flask.url_for(LOGIN_ENDPOINT, next=request.full_path.rstrip("?")))
    response = flask.jsonify(error="Login required.", login=flask.url_for(LOGIN_ENDPOINT))
    response.status_code = 401
    response.headers["WWW-Authenticate"] = 'Session realm="cohort-explorer"'
    return response


def _security_headers(response: flask.Response) -> flask.Response:
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if "/_dash-update-component" in request.path or request.endpoint == LOGIN_ENDPOINT:
        response.headers["Cache-Control"] = "no-store"
    return response


# -- login page --------------------------------------------------------------------------------

class _LoginThrottle:
    """Per-address failed-login counter (per process): slows password guessing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fails: dict[str, deque[float]] = defaultdict(deque)

    def blocked(self, addr: str) -> bool:
        now = time.monotonic()
        with self._lock:
            fails = self._fails[addr]
            while fails and now - fails[0] > _FAILURE_WINDOW_S:
                fails.popleft()
            return len(fails) >= _FAILURES_ALLOWED

    def fail(self, addr: str) -> None:
        with self._lock:
            self._fails[addr].append(time.monotonic())

    def clear(self, addr: str) -> None:
        with self._lock:
            self._fails.pop(addr, None)


def _safe_next(target: str | None) -> str:
    """Only same-site relative paths; anything else (//evil, https://evil) goes to '/'."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or "\\" in target:
        return "/"
    return target


def _login_view(store: UserStore, throttle: _LoginThrottle):
    addr = request.remote_addr or "?"
    error, status = "", 200
    if request.method == "POST":
        token = session.get("login_csrf")
        if not token or not secrets.compare_digest(token, request.form.get("csrf", "")):
            error, status = "Your login form expired; please try again.", 400
        elif throttle.blocked(addr):
            error, status = "Too many failed logins; wait a few minutes and try again.", 429
        else:
            record = store.verify(request.form.get("username", ""),
                                  request.form.get("password", ""))
            if record is not None:
                throttle.clear(addr)
                target = _safe_next(request.form.get("next"))
                session.clear()  # no session fixation: start a fresh session
                flask_login.login_user(_SessionUser(record))
                session.permanent = True
                return redirect(target)
            throttle.fail(addr)
            error, status = "Unknown user name or wrong password.", 401
    token = secrets.token_urlsafe(32)
    session["login_csrf"] = token
    page = _LOGIN_HTML.format(
        error=f'<p class="err">{html.escape(error)}</p>' if error else "",
        csrf=html.escape(token), next=html.escape(_safe_next(request.values.get("next"))))
    return flask.Response(page, status=status, mimetype="text/html")


def _logout_view():
    flask_login.logout_user()
    session.clear()
    return redirect(flask.url_for(LOGIN_ENDPOINT))


_LOGIN_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · Private Cohort Explorer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font-family:system-ui,sans-serif;background:#f4f6f8;display:flex;justify-content:center;
margin:0;padding-top:12vh}}
form{{background:#fff;padding:2rem 2.5rem;border-radius:8px;box-shadow:0 1px 4px #0002;width:20rem}}
h1{{font-size:1.2rem;margin:0 0 1rem}} label{{display:block;margin:.8rem 0 .2rem}}
input[type=text],input[type=password]{{width:100%;padding:.45rem;box-sizing:border-box}}
button{{margin-top:1.2rem;width:100%;padding:.55rem;background:#1f5f8b;color:#fff;border:0;
border-radius:4px}} .err{{color:#a40000}}
</style></head><body>
<form method="post" action="login">
<h1>Private Cohort Explorer</h1>{error}
<label for="username">User name</label>
<input id="username" name="username" type="text" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<input type="hidden" name="csrf" value="{csrf}"><input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
</form></body></html>
"""
