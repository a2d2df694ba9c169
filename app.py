"""Private Cohort Explorer — Dash entry point.

``create_app(config)`` builds one app with its own services and callbacks; the module-level
``app`` and ``server`` (for ``gunicorn -w N app:server``) are created on first access.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dash import Dash
from services.identity import assert_bind_allowed, init_auth

from callbacks import explore as explore_callbacks
from callbacks import shell as shell_callbacks
from layouts import shell
from services.config import AppConfig
from services.container import Services, build_services

ROOT = Path(__file__).resolve().parent


def create_app(config: AppConfig | Mapping[str, Any] | None = None, *,
               seed: int | None = None) -> Dash:
    """A new app. ``config``: AppConfig, a mapping of overrides, or None (environment)."""
    cfg = AppConfig.coerce(config)
    services = build_services(cfg, seed=seed)
    app = Dash(
        __name__,
        title="Private Cohort Explorer",
        assets_folder=str(ROOT / "assets"),
        suppress_callback_exceptions=True,
        update_title=None,
        meta_tags=[{"name": "viewport", "content": "width=device-width, initial-scale=1"}],
    )
    app.layout = shell.layout()
    init_auth(app.server, cfg.as_mapping())
    app.server.extensions["cohort"] = services
    register_callbacks(app, services)
    return app


def register_callbacks(app: Dash, services: Services) -> None:
    """Every page's callbacks, bound to this app only."""
    shell_callbacks.register_callbacks(app, services)
    explore_callbacks.register_callbacks(app, services)
    for name in ("data", "ledger", "anonymize"):
        try:
            module = __import__(f"callbacks.{name}", fromlist=["register_callbacks"])
        except ModuleNotFoundError:
            continue
        module.register_callbacks(app, services)


def services_of(app: Dash) -> Services:
    return app.server.extensions["cohort"]


_default: Dash | None = None


def __getattr__(name: str) -> Any:
    """Module-level ``app`` / ``server``, built on first access (gunicorn app:server)."""
    global _default
    if name in ("app", "server"):
        if _default is None:
            _default = create_app()
        return _default if name == "app" else _default.server
    raise AttributeError(name)


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    cfg = AppConfig.from_env()
    assert_bind_allowed(cfg.host, cfg.as_mapping())
    application = create_app(cfg)
    print(f"Private Cohort Explorer on http://{cfg.host}:{cfg.port}", flush=True)
    application.run(host=cfg.host, port=cfg.port, debug=cfg.debug)


if __name__ == "__main__":
    main()

