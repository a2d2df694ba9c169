"""Parquet files for tests: a normalized frame written as the ingestion writes its parts."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from services.data.integrity import check_counts, present_counts
from services.data.sources import ingest


def frame_to_parquet(frame: pd.DataFrame, out: Path) -> Path:
    """Write a normalized frame as one Parquet file, read back and checked against the frame."""
    out = Path(out)
    con = duckdb.connect()
    try:
        ingest._write_part(con, frame.copy(), out, None)
    finally:
        con.close()
    rows, held = ingest.stored_counts(out.parent, [str(c) for c in frame.columns], out.name)
    check_counts(present_counts(frame), held, len(frame), rows, out.name)
    return out
