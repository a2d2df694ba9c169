"""Parts of a page drawn once and sent again as plain JSON (a stored release's chart).

A stored release never changes, so its chart, its data table and its export buttons are
the same every time the role opens it. Building them is most of a cached answer's work:
several hundred Dash components (the table has a cell per number), each built and then
serialized for the response. ``RenderCache`` keeps the serialized form (the JSON the
browser receives, as plain lists and dicts, which the response encoder copies without
calling back into Dash) of the last ``size`` of them, per app.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from typing import Any

from plotly.io.json import to_json_plotly

from dp_engine.memo import Memo

SIZE = 256


def plain(component: Any) -> Any:
    """``component`` as the JSON a Dash response carries, in plain Python values."""
    return json.loads(to_json_plotly(component))


class RenderCache(Memo):
    """A bounded, thread-safe map from a key to the plain JSON of a drawn component."""

    def __init__(self, size: int = SIZE) -> None:
        super().__init__(size)

    def get(self, key: Hashable, draw: Callable[[], Any]) -> Any:  # type: ignore[override]
        """The stored drawing for ``key``, else ``plain(draw())``, stored."""
        return super().get(key, lambda: plain(draw()))
