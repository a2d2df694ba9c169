"""The Flask hook that enforces ``services.identity.limits.BodyLimits`` from Content-Length,
before anything reads a request's body (413, or 411 for a body without a length)."""

from __future__ import annotations

from collections.abc import Callable

import flask
from flask import request

from services.identity.limits import UPDATE_PATH, BodyLimits
from services.identity.roles import Role


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
