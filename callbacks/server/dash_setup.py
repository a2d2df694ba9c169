"""Finish Dash's one-time set-up before the first request, not during it.

Dash registers the component libraries (the paths ``/_dash-component-suites/`` may serve) in a
hook run by the first request, and marks that hook done before it has finished. With threaded
gunicorn workers, the requests a browser sends right after a restart raced it: a bundle asked
for meanwhile was refused with a 400 ("Registered libraries are: []").
"""

from __future__ import annotations

from dash import Dash


def finish_dash_setup(app: Dash) -> None:
    """Run Dash's first-request set-up now, in the thread that builds the app."""
    with app.server.test_request_context("/"):
        app._setup_server()  # Dash's own hook; later calls return at once
