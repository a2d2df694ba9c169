"""``GET /healthz``: is this worker up and its ledger database reachable? For load balancers,
monitoring and the upgrade steps in docs/operations.md.

Served without a session (the guard lets ``HEALTH_ENDPOINT`` through) and so it says nothing
else: no dataset, user, host or error text, only ``status``, ``database`` and the ledger's
``schema_version``. 200 when the database answers, 503 when not (the reason goes to the log).
"""

from __future__ import annotations

import logging

import flask
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from services.identity.session import HEALTH_ENDPOINT
from services.ops.preflight import database_status

log = logging.getLogger(__name__)
PATH = "/healthz"


def install_health(server: flask.Flask, engine: Engine) -> None:
    """Add ``/healthz`` over the ledger's ``engine``."""

    def _health() -> flask.Response:
        try:
            body, status = {"status": "ok", **database_status(engine)}, 200
        except (SQLAlchemyError, OSError) as exc:
            log.warning("Health check: the ledger database is unreachable (%s).",
                        " ".join(str(exc).split())[:300])
            body, status = {"status": "unavailable", "database": "unreachable",
                            "schema_version": None}, 503
        response = flask.jsonify(body)
        response.status_code = status
        response.headers["Cache-Control"] = "no-store"
        return response

    server.add_url_rule(PATH, HEALTH_ENDPOINT, _health, methods=["GET"])
