"""``GET /healthz``: is this worker up and its ledger database reachable? For load balancers,
monitoring and the upgrade steps in docs/operations.md.

Served without a session (the guard lets ``HEALTH_ENDPOINT`` through) and so it says nothing
else: no dataset, user, host or error text, only ``status``, ``database`` and the ledger's
``schema_version``. 200 when the database answers, 503 when not (the reason goes to the log).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flask

from services.identity.session import HEALTH_ENDPOINT

PATH = "/healthz"


def install_health(server: flask.Flask, report: Callable[[], tuple[dict[str, Any], int]]) -> None:
    """Add ``/healthz`` answering ``report()`` (``services.ops.preflight.health`` of the
    ledger's engine)."""

    def _health() -> flask.Response:
        body, status = report()
        response = flask.jsonify(body)
        response.status_code = status
        response.headers["Cache-Control"] = "no-store"
        return response

    server.add_url_rule(PATH, HEALTH_ENDPOINT, _health, methods=["GET"])
