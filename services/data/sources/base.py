"""The DataSource interface: aggregates computed where the data lives, rows only on a cap.

Every release in sound mode needs only the aggregates of ``AggregateQuery`` (counts,
lattice sums, candidate counts). Paper mode and the anonymizer read rows: they get at most
``ROW_CAP`` rows, a seeded uniform sample past that, and are told so (``RowSample``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from dp_engine.sound.aggregates import CandidateCounts, CellCounts, MomentSums
from services.data.errors import DatasetError
from services.data.sources.labels import StorageKind
from services.data.sources.query import AggregateKind, AggregateQuery, Aggregates

ROW_CAP = 200_000
"""Most rows paper mode and the anonymizer read; past it a seeded uniform sample of this size."""


@dataclass(frozen=True)
class RowSample:
    """Rows read for a row-based computation; ``sampled`` when the table had more than the cap."""

    frame: pd.DataFrame
    sampled: bool
    cap: int

    @property
    def note(self) -> str:
        if not self.sampled:
            return ""
        return (f"Computed on a uniform random sample of {self.cap:,} rows "
                "(row-based methods read at most this many).")


class DataSource(ABC):
    """Answers aggregate queries over one table; never returns rows except ``read_rows``."""

    backend: str = "abstract"
    bounds_contributions: bool = False
    """True when the source can keep at most k rows per patient (``AggregateQuery.patient``)."""

    def aggregate(self, query: AggregateQuery) -> Aggregates:
        """The aggregate ``query`` asks for (dispatch on its kind)."""
        self.check_columns(query.columns)
        if query.kind is AggregateKind.CELLS:
            return self.cell_counts(query)
        if query.kind is AggregateKind.MOMENTS:
            return self.moment_sums(query)
        return self.candidate_counts(query)

    def aggregate_many(self, queries: Sequence[AggregateQuery]) -> list[Aggregates]:
        """Several aggregates at once (SQL sources answer them in one statement)."""
        return [self.aggregate(q) for q in queries]

    @abstractmethod
    def storage_kinds(self) -> dict[str, StorageKind]:
        """Column name -> how the backend stores it."""

    @abstractmethod
    def cell_counts(self, query: AggregateQuery) -> CellCounts: ...

    @abstractmethod
    def moment_sums(self, query: AggregateQuery) -> MomentSums: ...

    @abstractmethod
    def candidate_counts(self, query: AggregateQuery) -> CandidateCounts: ...

    @abstractmethod
    def row_count(self) -> int:
        """How many rows the table holds, counted where it lives (no row is read)."""

    @abstractmethod
    def read_rows(self, columns: Sequence[str], *, cap: int = ROW_CAP,
                  seed: int = 0) -> RowSample:
        """At most ``cap`` rows of ``columns`` (a seeded uniform sample past it)."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections (a no-op for in-memory sources)."""

    def check_columns(self, names: Sequence[str]) -> None:
        kinds = self.storage_kinds()
        absent = [n for n in names if n not in kinds]
        if absent:
            raise DatasetError(
                f"The {self.backend} table has no column named {', '.join(absent)}; "
                "check that the schema file matches the table."
            )
