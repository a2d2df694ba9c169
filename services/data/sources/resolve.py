"""From a registry dataset to its aggregates: the one call Explore plans make.

``aggregates(dataset, query)`` answers on the dataset's own source: DuckDB, PostgreSQL or
Spark for large files and warehouse tables (``dataset.data``), otherwise the in-memory frame
through the numpy reference. ``read_rows`` is the capped row reader for row-based methods.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from services.data.errors import DatasetError
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
    source = source_of(dataset)
    _check_bound(source, query)
    return source.aggregate(query)


def _check_bound(source: DataSource, query: AggregateQuery) -> None:
    """A source that cannot bound rows per patient never answers as if it had."""
    if query.patient is not None and not source.bounds_contributions:
        raise DatasetError(
            f"This {source.backend} table names a patient column ('{query.patient}'), but "
            "keeping at most a fixed number of rows per patient is only done in memory so "
            "far. Load a per-patient table, or remove the patient column from the schema to "
            "release per row (the page will then say 'per row').")


def aggregates_many(dataset: Any, queries: Sequence[AggregateQuery]) -> list[Aggregates]:
    """Several aggregates in one round trip (one SQL statement on SQL sources)."""
    source = source_of(dataset)
    for q in queries:
        _check_bound(source, q)
    return source.aggregate_many(queries)


def read_rows(dataset: Any, columns: Sequence[str], *, cap: int = ROW_CAP,
              seed: int = 0) -> RowSample:
    """At most ``cap`` rows for paper mode or the anonymizer (a seeded sample past it)."""
    return source_of(dataset).read_rows(columns, cap=cap, seed=seed)
