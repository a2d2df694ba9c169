"""Every row and every value of a file arrives, whichever path stores it (issue 20 item 1).

A file larger than one parse chunk used to keep only its first chunk's values: each later
chunk's index started at 1_000_000, 2_000_000, … and the normalized frame was built on
0..n-1, so pandas aligned the values away. Here the chunk size is patched small so a
2,500-row file is read in three chunks, and what each path stores is compared with the file
parsed whole (one chunk, so untouched by chunking): rows, values present per column and the
multiset of values per column. A store whose counts differ from its parse is refused and
nothing already loaded is replaced.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from services.data.csv_loader import load_csv
from services.data.errors import DatasetError
from services.data.registry import SAMPLE_CSV, SAMPLE_SCHEMA, DatasetRegistry
from services.data.schema_files import read_schema_file
from services.data.sources import ingest

ROWS = 2_500
CHUNK = 1_000


def _repeated_csv(out: Path, rows: int = ROWS) -> Path:
    """The sample cohort repeated to ``rows`` rows, each with a unique patient id."""
    base = pd.read_csv(SAMPLE_CSV, dtype=str, keep_default_na=False)
    reps = -(-rows // len(base))
    big = pd.concat([base] * reps, ignore_index=True).iloc[:rows].copy()
    big["Anonym_ID"] = [str(100_000 + i) for i in range(rows)]
    big.to_csv(out, index=False)
    return out


def _canonical(value) -> str | None:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float | np.floating):
        return None if np.isnan(value) else repr(round(float(value), 9))
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, pd.Timestamp | np.datetime64):
        return pd.Timestamp(value).date().isoformat()
    if isinstance(value, int | np.integer):
        return repr(float(value))
    return str(value)


def _profile(frame: pd.DataFrame) -> dict[str, Counter]:
    """Per column, the multiset of present values in one canonical text form."""
    out = {}
    for name in frame.columns:
        values = (_canonical(v) for v in frame[name].astype(object).tolist())
        out[str(name)] = Counter(v for v in values if v is not None)
    return out


def _source(csv: Path) -> pd.DataFrame:
    """The file parsed whole, as a small upload is: the reference every store must equal."""
    frame, _, _ = load_csv(csv.read_bytes(), filename=csv.name,
                           schema=read_schema_file(SAMPLE_SCHEMA), max_bytes=1 << 40)
    return frame


def _stored(glob: str) -> pd.DataFrame:
    con = duckdb.connect()
    try:
        return con.read_parquet(glob).df()
    finally:
        con.close()


def _same(stored: pd.DataFrame, source: pd.DataFrame) -> None:
    assert len(stored) == len(source) == ROWS
    assert stored.notna().sum().to_dict() == source.notna().sum().to_dict()
    got, want = _profile(stored), _profile(source)
    for name in source.columns:
        assert got[str(name)] == want[str(name)], name


@pytest.fixture()
def small_chunks(monkeypatch):
    monkeypatch.setattr(ingest, "CHUNK_ROWS", CHUNK)


@pytest.fixture()
def csv(tmp_path) -> Path:
    (tmp_path / "files").mkdir()
    return _repeated_csv(tmp_path / "files" / "cohort.csv")


def test_every_chunk_keeps_its_values(small_chunks, csv, tmp_path):
    done = ingest.ingest_csv(csv, tmp_path / "store", schema=read_schema_file(SAMPLE_SCHEMA))
    assert len(sorted(done.parquet.glob("*.parquet"))) == 3       # three chunks were written
    source = _source(csv)
    _same(_stored(done.glob), source)
    # the load report counts what the store holds
    assert done.report.rows == ROWS
    assert done.report.present == {str(k): int(v) for k, v in source.notna().sum().items()}
    assert done.report.missing == {str(k): ROWS - int(v) for k, v in
                                   source.notna().sum().items() if ROWS - int(v)}


def test_later_chunks_are_not_empty(small_chunks, csv, tmp_path):
    """The reported bug itself: parts 2 and 3 held 0 values of every column."""
    done = ingest.ingest_csv(csv, tmp_path / "store", schema=read_schema_file(SAMPLE_SCHEMA))
    for part in sorted(done.parquet.glob("*.parquet"))[1:]:
        frame = _stored(str(part))
        assert frame["Age"].notna().sum() > 0.9 * len(frame)


def test_configured_file_and_large_upload_store_every_value(small_chunks, csv, tmp_path):
    shutil.copy(SAMPLE_SCHEMA, csv.with_name("cohort.schema.json"))
    reg = DatasetRegistry(tmp_path / "var", extra_paths=[csv], large_file_bytes=10_000)
    assert not reg.problems
    configured = reg.get("cohort")
    source = _source(csv)
    _same(_stored(configured.data.path), source)
    upload = reg.add_upload("export.csv", csv.read_bytes())
    assert upload.data is not None          # streamed into Parquet, not held in memory
    assert upload.load_report.rows == ROWS
    stored_up = upload.data.read_rows(list(upload.schema.names), cap=10 * ROWS).frame
    # the upload's schema is proposed, not the sample's: compare the columns both keep
    # typed alike (numbers and the patient id) with the file parsed whole
    for name in ("Age", "PIRADS score", "Anonym_ID"):
        assert int(stored_up[name].notna().sum()) == int(source[name].notna().sum()), name
        assert upload.load_report.present[name] == int(source[name].notna().sum())


def test_small_upload_keeps_every_value(csv, tmp_path):
    """An upload parsed in memory (one chunk) equals the reference too."""
    reg = DatasetRegistry(tmp_path / "var")
    ds = reg.add_upload("cohort.csv", csv.read_bytes())
    assert ds.data is None
    assert ds.load_report.rows == ROWS
    assert ds.load_report.present == {str(k): int(v)
                                      for k, v in ds.frame.notna().sum().items()}
    source = pd.read_csv(csv, dtype=str)
    for name in ("Age", "PIRADS score", "Anonym_ID"):
        assert int(ds.frame[name].notna().sum()) == int(source[name].notna().sum()), name


def test_a_frame_with_offset_labels_is_normalized_whole():
    """apply_schema on a chunk labelled 1000.. keeps its values (the root cause)."""
    from services.data.normalization import apply_schema

    raw = pd.read_csv(SAMPLE_CSV, nrows=50)
    raw.index = pd.RangeIndex(1_000, 1_050)
    frame, _, report = apply_schema(raw, read_schema_file(SAMPLE_SCHEMA), filename="x.csv")
    assert frame["Age"].notna().sum() == raw["Age"].notna().sum() > 0
    assert report.present["Age"] == int(raw["Age"].notna().sum())


def _lossy_writer(real):
    """A part writer that loses the Age values of every part after the first."""
    calls = {"n": 0}

    def write(con, frame, out, types):
        calls["n"] += 1
        if calls["n"] > 1:
            frame = frame.copy()
            frame["Age"] = np.nan
        return real(con, frame, out, types)

    return write


def test_a_store_that_lost_values_is_refused(small_chunks, csv, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "_write_part", _lossy_writer(ingest._write_part))
    store = tmp_path / "store"
    with pytest.raises(DatasetError, match="Age") as err:
        ingest.ingest_csv(csv, store, schema=read_schema_file(SAMPLE_SCHEMA))
    assert "Nothing was replaced" in str(err.value)
    assert not list(store.iterdir())          # no folder, not even a temporary one


def test_a_refused_new_version_leaves_the_previous_one_in_place(small_chunks, csv, tmp_path,
                                                                monkeypatch):
    shutil.copy(SAMPLE_SCHEMA, csv.with_name("cohort.schema.json"))
    first = DatasetRegistry(tmp_path / "var", extra_paths=[csv], large_file_bytes=10_000)
    old = first.get("cohort")
    # the file changes on disk (a new export), and its ingestion loses values
    _repeated_csv(csv, ROWS + 7)
    monkeypatch.setattr(ingest, "_write_part", _lossy_writer(ingest._write_part))
    again = DatasetRegistry(tmp_path / "var", extra_paths=[csv], large_file_bytes=10_000)
    kept = again.get("cohort")
    assert kept.version == old.version        # the previous version is still the one shown
    assert kept.load_report.rows == ROWS
    assert any("not loaded" in p and "still the one shown" in p for p in again.problems)


def test_the_first_version_refused_is_not_loaded(small_chunks, csv, tmp_path, monkeypatch):
    shutil.copy(SAMPLE_SCHEMA, csv.with_name("cohort.schema.json"))
    monkeypatch.setattr(ingest, "_write_part", _lossy_writer(ingest._write_part))
    reg = DatasetRegistry(tmp_path / "var", extra_paths=[csv], large_file_bytes=10_000)
    assert "cohort" not in {d.id for d in reg.list()}
    assert any("differs from what was read" in p for p in reg.problems)
