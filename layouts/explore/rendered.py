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
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from plotly.io.json import to_json_plotly

SIZE = 256


def plain(component: Any) -> Any:
    """``component`` as the JSON a Dash response carries, in plain Python values."""
    return json.loads(to_json_plotly(component))


class RenderCache:
    """A bounded, thread-safe map from a key to the plain JSON of a drawn component."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, draw: Callable[[], Any]) -> Any:
        """The stored drawing for ``key``, else ``plain(draw())``, stored."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        drawn = plain(draw())
        with self._lock:
            self._items[key] = drawn
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return drawn

    def __len__(self) -> int:
        return len(self._items)
