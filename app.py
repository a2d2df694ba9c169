"""Private Cohort Explorer — Dash entry point.

``create_app(config)`` builds one app with its own services and callbacks; the module-level
``app`` and ``server`` (for ``gunicorn -w N app:server``) are created on first access, and
they and ``main`` (``make run``) warm the first figure's code paths in the background
(``callbacks.server.warmup``). Importing this module loads no heavy optional module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import flask
from dash import Dash
from flask_compress import Compress
from werkzeug.exceptions import HTTPException

from callbacks import anonymize as anonymize_callbacks
from callbacks import data as data_callbacks
from callbacks import explore as explore_callbacks
from callbacks import ledger as ledger_callbacks
from callbacks import login as login_routes
from callbacks import publish as publish_callbacks
from callbacks import shell as shell_callbacks
from callbacks import studio as studio_callbacks
from callbacks.server import warmup
from callbacks.server.auth import IdentityService, init_auth, user_role
from layouts.components import shell
from services.config import AppConfig
from services.container import Services, build_services
from services.identity.session import FAVICON_ENDPOINT, HEALTH_ENDPOINT, assert_bind_allowed
from services.ops import logs, preflight

ROOT = Path(__file__).resolve().parent
log = logging.getLogger(__name__)

FAVICON = "favicon.svg"
INDEX_STRING = f"""<!DOCTYPE html>
<html lang="en">
    <head>
        {{%metas%}}
        <title>{{%title%}}</title>
        <link rel="icon" type="image/svg+xml" href="/{FAVICON}">
        {{%css%}}
    </head>
    <body>
        {{%app_entry%}}
        <footer>
            {{%config%}}
            {{%scripts%}}
            {{%renderer%}}
        </footer>
    </body>
</html>"""
"""Dash's page with the document language, the product's icon (served without login, see
``install_favicon``) and no Internet Explorer banner."""


def create_app(config: AppConfig | Mapping[str, Any] | None = None, *,
               seed: int | None = None) -> Dash:
    """A new app. ``config``: AppConfig, a mapping of overrides, or None (environment)."""
    cfg = AppConfig.coerce(config)
    services = build_services(cfg, identity=IdentityService(), user_role=user_role, seed=seed)
    app = Dash(
        __name__,
        title=shell.PRODUCT,
        index_string=INDEX_STRING,
        assets_folder=str(ROOT / "assets"),
        suppress_callback_exceptions=True,
        use_pages=True,
        pages_folder="",
        include_pages_meta=False,
        update_title=None,
        meta_tags=[{"name": "viewport", "content": "width=device-width, initial-scale=1"}],
    )
    app.layout = shell.layout()
    shell_callbacks.register_pages()
    start_pages_router(app)
    install_page_titles(app)
    # headers, body limits and the session guard run before Dash's own hooks
    init_auth(app.server, cfg.as_mapping(), script_hashes=app.csp_hashes)
    login_routes.register(app.server)
    install_favicon(app.server)
    install_compression(app.server)
    install_error_handlers(app.server)
    install_health(app.server, lambda: preflight.health(services.ledger.db.engine))
    app.server.extensions["cohort"] = services
    register_callbacks(app, services)
    finish_dash_setup(app)  # before any request: threads must not race Dash's lazy set-up
    return app


def register_callbacks(app: Dash, services: Services) -> None:
    """Every page's callbacks, bound to this app only."""
    for page in (shell_callbacks, explore_callbacks, data_callbacks, ledger_callbacks,
                 anonymize_callbacks, publish_callbacks, studio_callbacks):
        page.register_callbacks(app, services)


def start_pages_router(app: Dash) -> None:
    """Add Dash Pages' router now rather than at the first request (Dash's default). Its
    callbacks include an inline title script, and the Content-Security-Policy's script hashes
    are fixed at the first response, which may be a refusal that never reaches Dash's hooks."""
    hooks = [h for h in app.server.before_request_funcs.get(None, [])
             if getattr(h, "__name__", "") == "router_sync"]
    if len(hooks) != 1:
        raise RuntimeError("Dash Pages' router hook was not found (a Dash upgrade?)")
    with app.server.test_request_context("/"):
        hooks[0]()


def install_page_titles(app: Dash) -> None:
    """The first HTML of every route carries that page's own title (Dash Pages keeps it right
    after in-page navigation)."""
    interpolate = app.interpolate_index

    def _interpolate(**kwargs: Any) -> str:
        path = flask.request.path if flask.has_request_context() else "/"
        return interpolate(**{**kwargs, "title": shell_callbacks.page_title(path)})

    app.interpolate_index = _interpolate  # type: ignore[method-assign]


def install_favicon(server: flask.Flask) -> None:
    """The product's icon at /favicon.svg (and /favicon.ico, where browsers look unasked),
    public like the sign-in page: the session guard lets ``FAVICON_ENDPOINT`` through."""

    def _favicon() -> flask.Response:
        return flask.send_from_directory(ROOT / "assets", FAVICON, mimetype="image/svg+xml",
                                         max_age=86400)

    server.add_url_rule(f"/{FAVICON}", FAVICON_ENDPOINT, _favicon)
    server.add_url_rule("/favicon.ico", FAVICON_ENDPOINT + "_ico", _favicon)


def install_health(server: flask.Flask, report: Callable[[], tuple[dict[str, Any], int]]) -> None:
    """``GET /healthz`` answering ``report()`` (``services.ops.preflight.health``: is the ledger
    database reachable, its schema version; nothing else), without a session and never cached."""

    def _health() -> flask.Response:
        body, status = report()
        response = flask.jsonify(body)
        response.status_code = status
        response.headers["Cache-Control"] = "no-store"
        return response

    server.add_url_rule("/healthz", HEALTH_ENDPOINT, _health, methods=["GET"])


def finish_dash_setup(app: Dash) -> None:
    """Run Dash's first-request set-up now, in the thread that builds the app: Dash marks its
    hook done before it has registered the component libraries, so with threaded workers a
    bundle asked for right after a restart was refused ("Registered libraries are: []")."""
    with app.server.test_request_context("/"):
        app._setup_server()  # Dash's own hook; later calls return at once


def install_error_handlers(server: flask.Flask) -> None:
    """A malformed or forged request gets a plain 400, never a 500 with a traceback."""

    @server.errorhandler(Exception)
    def _unexpected(exc: Exception):
        if isinstance(exc, HTTPException):
            return exc
        log.warning("Rejected request to %s: %r", flask.request.path, exc)
        if flask.request.path.endswith("/_dash-update-component"):
            return flask.jsonify(message="This request could not be processed. Nothing was "
                                         "changed; reload the page and try again."), 400
        return "This request could not be processed. Nothing was changed.", 400


STATIC_PREFIXES = ("GET /assets/", "GET /_dash-component-suites/")


class _StaticGzipCache:
    """Compressed static files, kept once per URL (asset URLs carry their file's mtime).

    Only GET requests for /assets and Dash's component bundles are stored: every other
    response (callbacks, layouts) is compressed afresh and never shared between requests.
    """

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self._data.get(key)

    def set(self, key: str, value: bytes) -> None:
        if key.split(";", 1)[-1].startswith(STATIC_PREFIXES) and len(self._data) < 256:
            self._data[key] = value


def install_compression(server: flask.Flask) -> None:
    """gzip every text response (the first page's scripts: about 3.3 MB raw, under 1 MB sent)."""
    server.config.setdefault("COMPRESS_ALGORITHM", ["gzip"])
    server.config.setdefault("COMPRESS_LEVEL", 6)
    server.config.setdefault("COMPRESS_MIN_SIZE", 500)
    server.config.setdefault("COMPRESS_CACHE_BACKEND", _StaticGzipCache)
    server.config.setdefault("COMPRESS_CACHE_KEY",
                             lambda req: f"{req.method} {req.full_path}")
    Compress(server)

    @server.after_request  # runs before Compress's hook: static files arrive streamed
    def _buffer_static(response: flask.Response) -> flask.Response:
        if response.is_streamed and flask.request.path.startswith("/assets/"):
            response.direct_passthrough = False
            response.make_sequence()
        return response


def services_of(app: Dash) -> Services:
    return app.server.extensions["cohort"]


_default: Dash | None = None


def __getattr__(name: str) -> Any:
    """Module-level ``app`` / ``server``, built on first access (gunicorn app:server)."""
    global _default
    if name in ("app", "server"):
        if _default is None:
            _default = create_app()
            warmup.start(services_of(_default))      # a served app: warm its first figure
        return _default if name == "app" else _default.server
    raise AttributeError(name)


def main() -> None:
    logs.configure()
    cfg = preflight.check_or_exit()
    assert_bind_allowed(cfg.host, cfg.as_mapping())
    application = create_app(cfg)
    warmup.start(services_of(application))
    print(f"Private Cohort Explorer on http://{cfg.host}:{cfg.port}", flush=True)
    application.run(host=cfg.host, port=cfg.port, debug=cfg.debug)


if __name__ == "__main__":
    main()

