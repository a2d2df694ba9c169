"""Stand-in services for page tests that need only a few of them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from services.runner import InlineRunner


def stand_in(**parts: Any) -> SimpleNamespace:
    """A services stand-in holding ``parts`` and an inline runner bound to it (heavy work
    runs as in tests and ``make run``)."""
    services = SimpleNamespace(**parts)
    services.runner = InlineRunner()
    services.runner.bind(services)
    return services
