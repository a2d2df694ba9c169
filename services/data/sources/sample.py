"""A large dataset's row sample, read on first use by a page that needs rows, then kept.

Sound-mode views, publishing and previews answer from the source's aggregates and never
touch it, so a web worker that only serves them holds no patient rows (issue 14: at most
500 MB per worker whatever n is). The anonymizer, the release studio and paper mode read
rows: the first of them in a worker pays one capped read (``ROW_CAP`` rows, seeded).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from services.data.sources.base import ROW_CAP, DataSource, RowSample


class LazySample:
    """``source.read_rows(columns, cap, seed)`` done once, on the first ``get()``."""

    def __init__(self, source: DataSource, columns: Sequence[str], *, cap: int = ROW_CAP,
                 seed: int = 0) -> None:
        self.source = source
        self.columns = tuple(columns)
        self.cap = int(cap)
        self.seed = int(seed)
        self._sample: RowSample | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the rows have been read in this process."""
        return self._sample is not None

    def get(self) -> RowSample:
        """The sample, read from the source on the first call (one read per process)."""
        if self._sample is None:
            with self._lock:
                if self._sample is None:
                    self._sample = self.source.read_rows(self.columns, cap=self.cap,
                                                         seed=self.seed)
        return self._sample

    def __repr__(self) -> str:
        state = "read" if self.loaded else "not read"
        return f"LazySample({self.source.backend}, {len(self.columns)} columns, {state})"
