"""A bounded, thread-safe memo: the least recently used answer goes first.

For work asked again and again with the same public inputs: the quantile error models'
simulations (tuples of arrays, stored read-only so no caller can change a shared answer) and
a stored release's drawing (``layouts/explore/rendered.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Memo(Generic[T]):
    """At most ``size`` answers by key; ``read_only``: answers are tuples of arrays, frozen."""

    def __init__(self, size: int, *, read_only: bool = False) -> None:
        self.size = size
        self.read_only = read_only
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The stored answer for ``key``, else ``compute()``, stored."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        out = compute()
        if self.read_only:
            for a in out:                       # type: ignore[attr-defined]
                a.setflags(write=False)
        with self._lock:
            self._items[key] = out
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return out

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
