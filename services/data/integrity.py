"""Nothing a file holds may be lost on its way into a store: counts compared, loss refused.

Every path that writes a dataset (an upload parsed in memory, a large file streamed into
Parquet parts) compares what it parsed with what it holds afterwards: the number of rows
and, per column, the number of values present. A difference means values were lost (or
invented) between the parse and the store, so the load is refused with a message the data
officer can act on, and nothing already stored is replaced.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from services.data.errors import DatasetError


def present_counts(frame: pd.DataFrame) -> dict[str, int]:
    """Values present (not missing) per column of a frame."""
    return {str(name): int(n) for name, n in frame.notna().sum().items()}


def check_counts(parsed: Mapping[str, int], stored: Mapping[str, int], parsed_rows: int,
                 stored_rows: int, filename: str) -> None:
    """Refuse (DatasetError) unless the store holds every row and every value parsed."""
    lost = [(name, n, int(stored.get(name, 0))) for name, n in parsed.items()
            if int(stored.get(name, 0)) != int(n)]
    if stored_rows == parsed_rows and not lost:
        return
    shown = "; ".join(f"'{name}' {got:,} of {want:,} values" for name, want, got in lost[:5])
    more = f" (and {len(lost) - 5} more columns)" if len(lost) > 5 else ""
    rows = ("" if stored_rows == parsed_rows else
            f" {stored_rows:,} of {parsed_rows:,} rows were stored.")
    raise DatasetError(
        f"'{filename}' was not loaded: what was stored differs from what was read, so values "
        f"would have been lost.{rows}{' Stored: ' + shown + more + '.' if lost else ''} "
        "Nothing was replaced: the datasets already loaded are unchanged. Please report this "
        "to the administrator with the file's name."
    )
