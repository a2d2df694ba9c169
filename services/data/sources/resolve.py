"""From a registry dataset to its aggregates: the one call Explore plans make.

``aggregates(dataset, query)`` answers on the dataset's own source: DuckDB, PostgreSQL or
Spark for large files and warehouse tables (``dataset.data``), otherwise the in-memory frame
through the numpy reference. ``read_rows`` is the capped row reader for row-based methods.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from services.data.sources.base import ROW_CAP, DataSource, RowSample
from services.data.sources.memory import PandasSource
from services.data.sources.query import AggregateQuery, Aggregates

_memory: dict[int, tuple[Any, PandasSource]] = {}
_lock = threading.Lock()


def source_of(dataset: Any) -> DataSource:
    """The DataSource holding ``dataset``'s rows (one PandasSource per in-memory frame)."""
    data = getattr(dataset, "data", None)
    if data is not None:
        return data
    frame = dataset.frame
    with _lock:
        hit = _memory.get(id(frame))
        if hit is None or hit[0] is not frame:
            if len(_memory) > 64:
                _memory.clear()
            hit = (frame, PandasSource(frame))
            _memory[id(frame)] = hit
        return hit[1]


def aggregates(dataset: Any, query: AggregateQuery) -> Aggregates:
    """The aggregate ``query`` asks for, computed where ``dataset`` lives."""
    return source_of(dataset).aggregate(query)


def aggregates_many(dataset: Any, queries: Sequence[AggregateQuery]) -> list[Aggregates]:
    """Several aggregates in one round trip (one SQL statement on SQL sources)."""
    return source_of(dataset).aggregate_many(queries)


def read_rows(dataset: Any, columns: Sequence[str], *, cap: int = ROW_CAP,
              seed: int = 0) -> RowSample:
    """At most ``cap`` rows for paper mode or the anonymizer (a seeded sample past it)."""
    return source_of(dataset).read_rows(columns, cap=cap, seed=seed)
