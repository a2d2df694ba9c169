"""Request-body limits per role and route, enforced from Content-Length before anything reads
the body.

Anonymous requests may send a login form; signed-in non-owners a Dash callback's inputs; only
the owner may send a file (the Data page's upload arrives base64-encoded inside a callback, so
its limit is the upload limit plus a third). The role comes from the server session. A body
must declare its length: a chunked body is refused with 411 (browsers never send one; nginx
re-sends bodies with a length), and Flask would cut any other at the same limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import flask
from flask import request

from services.identity.roles import Role

UPDATE_PATH = "/_dash-update-component"


@dataclass(frozen=True)
class BodyLimits:
    """Largest request body in bytes: anonymous, signed-in non-owner, owner callback."""

    anonymous: int = 16 * 1024
    member: int = 512 * 1024
    owner: int = 68 * 1024 * 1024

    @classmethod
    def for_upload(cls, max_upload_bytes: int, member: int = 512 * 1024) -> BodyLimits:
        """The owner's callback limit from the upload limit (base64 is 4/3 of the file)."""
        return cls(member=member, owner=max(member, max_upload_bytes * 4 // 3 + 256 * 1024))

    @property
    def largest(self) -> int:
        return max(self.anonymous, self.member, self.owner)

    def limit(self, authenticated: bool, role: Role, path: str) -> int:
        if not authenticated:
            return self.anonymous
        if role is Role.OWNER and path.endswith(UPDATE_PATH):
            return self.owner
        return self.member


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
