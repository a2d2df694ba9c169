"""Modules imported on first use, not when the app starts (issue 20: `import app` ≤ 3 s).

``duckdb = lazy("duckdb")`` reads like the module everywhere (``duckdb.connect(...)``,
``except duckdb.Error``) but loads it on the first attribute read: a server whose datasets
are all small CSV files never pays for it.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any


class LazyModule:
    """A stand-in for a module, imported on first attribute access (thread-safe)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None
        self._lock = threading.Lock()

    def load(self) -> ModuleType:
        if self._module is None:
            with self._lock:
                if self._module is None:
                    self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.load(), attr)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module {self._name!r} ({state})>"


def lazy(name: str) -> LazyModule:
    """A module imported when first used."""
    return LazyModule(name)
