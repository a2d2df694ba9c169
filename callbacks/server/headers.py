"""Security headers on every response, including a Content-Security-Policy that Dash runs under.

Dash 4 needs one inline script (``new DashRenderer()``, plus any clientside callback): it is
allowed by hash (``Dash.csp_hashes()``), never by 'unsafe-inline'. Styles do need
'unsafe-inline': plotly.js and the dropdowns insert ``<style>`` elements at run time. Nothing
is framed (frame-ancestors 'none') and nothing leaves for another origin (connect-src 'self').
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flask
from flask import request

_STATIC_PARTS = ("/assets/", "/_dash-component-suites/", "/_favicon.ico")


def content_security_policy(script_hashes: Sequence[str] = ()) -> str:
    """The policy text; ``script_hashes`` are CSP source expressions like 'sha256-...'."""
    return "; ".join([
        "default-src 'self'",
        " ".join(["script-src 'self'", *script_hashes]),
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


def install_security_headers(server: flask.Flask, *, hsts_seconds: int,
                             script_hashes: Callable[[], Sequence[str]] | None = None) -> None:
    """Add the headers to every response of ``server`` (errors and refusals included).

    ``script_hashes`` is called once, at the first response, when every callback (and so
    every inline script) is registered.
    """
    policy: list[str] = []

    def _headers(response: flask.Response) -> flask.Response:
        if not policy:
            policy.append(content_security_policy(script_hashes() if script_hashes else ()))
        h = response.headers
        h["Content-Security-Policy"] = policy[0]
        h["X-Content-Type-Options"] = "nosniff"
        h["X-Frame-Options"] = "DENY"
        h["Referrer-Policy"] = "same-origin"
        h["Cross-Origin-Opener-Policy"] = "same-origin"
        h["Permissions-Policy"] = "camera=(), microphone=(), geolocation=(), payment=()"
        if hsts_seconds > 0:  # browsers ignore it over plain HTTP, as RFC 6797 says
            h["Strict-Transport-Security"] = f"max-age={int(hsts_seconds)}; includeSubDomains"
        if not any(part in request.path for part in _STATIC_PARTS):
            h["Cache-Control"] = "no-store"
        return response

    server.after_request(_headers)
