"""The /login and /logout routes (plain Flask views, served before Dash): thin, as callbacks are.

Login: the form token, then the shared throttle, then the password; every failure is counted
and audited. Logout: POST only, with the session's CSRF token; the server-side session is
revoked, so the old cookie opens nothing on any worker.
"""

from __future__ import annotations

import math
import secrets
from urllib.parse import urlsplit

import flask
from flask import redirect, request, session

from callbacks.server.auth import (
    AuthState,
    auth_state,
    cookie_secure,
    end_session,
    logout_token,
    start_session,
)
from layouts.login.page import login_page
from services.identity.session import LOGIN_ENDPOINT, LOGOUT_ENDPOINT, host_name, is_loopback

PLAIN_HTTP_NOTICE = ("This address is served over plain HTTP, so your browser will not keep "
                     "the sign-in cookie. Open the dashboard's https:// address instead.")


def register(server: flask.Flask) -> None:
    """Add /login and /logout to a server whose identity layer runs in users mode."""
    state = auth_state(server)
    if state is None or state.embedded:
        return
    server.add_url_rule("/login", LOGIN_ENDPOINT, lambda: _login(state),
                        methods=["GET", "POST"])
    server.add_url_rule("/logout", LOGOUT_ENDPOINT, lambda: _logout(state), methods=["POST"])


def safe_next(target: str | None) -> str:
    """Only same-site relative paths; anything else (//evil, https://evil) goes to '/'."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or "\\" in target:
        return "/"
    return target


def _login(state: AuthState):
    error, status, headers = "", 200, {}
    if request.method == "POST":
        name = request.form.get("username", "")
        client = request.remote_addr or "unknown"
        token = session.get("login_csrf")
        if not token or not secrets.compare_digest(token, request.form.get("csrf", "")):
            error, status = "Your sign-in form expired; please try again.", 400
        elif (wait := state.throttle.wait_s(name, client)) > 0:
            state.throttle.record_refusal(name, client, "refused: backoff")
            seconds = math.ceil(wait)
            error, status = (f"Too many failed sign-ins for this account or from this "
                             f"address. Try again in {seconds} seconds."), 429
            headers["Retry-After"] = str(seconds)
        else:
            record = state.store.verify(name, request.form.get("password", ""))
            if record is not None:
                state.throttle.record_success(name)
                target = safe_next(request.form.get("next"))
                start_session(state, record)
                return redirect(target)
            state.throttle.record_failure(name, client, "unknown user or wrong password")
            error, status = "Unknown user name or wrong password.", 401
    token = secrets.token_urlsafe(32)
    session["login_csrf"] = token
    plain_http = not request.is_secure and not is_loopback(host_name(request.host or ""))
    notice = PLAIN_HTTP_NOTICE if plain_http and cookie_secure(state.settings) else ""
    page = login_page(csrf=token, next_url=safe_next(request.values.get("next")),
                      error=error, notice=notice)
    return flask.Response(page, status=status, mimetype="text/html", headers=headers)


def _logout(state: AuthState):
    expected = logout_token()
    if expected is not None and not secrets.compare_digest(expected,
                                                           request.form.get("csrf", "")):
        return flask.Response("This sign-out form expired; reload the page and sign out again.\n",
                              status=400, mimetype="text/plain")
    end_session(state)
    return redirect(flask.url_for(LOGIN_ENDPOINT))
