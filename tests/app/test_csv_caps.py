"""Issue 12: caps checked before any per-column work, and ragged rows reported by line.

"Before any per-column work" is asserted on what was done (the parser and the schema proposal
are replaced by spies that record their calls), never on elapsed time; bench/ has the times.
"""

from __future__ import annotations

import json

import pytest

from dp_engine.errors import SchemaError
from dp_engine.schema import Schema
from services.data import csv_loader, normalization, schema_inference
from services.data.errors import DatasetError
from services.data.limits import MAX_CATEGORIES, MAX_COLUMNS, MAX_HEADER_BYTES
from services.data.registry import load_csv
from services.data.schema_files import read_schema_file


@pytest.fixture
def calls(monkeypatch) -> list[str]:
    """Names of the per-column steps that ran (the CSV parse, the proposal, the typing)."""
    done: list[str] = []

    def spy(name, real):
        def wrapper(*args, **kwargs):
            done.append(name)
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(csv_loader.pd, "read_csv", spy("read_csv", csv_loader.pd.read_csv))
    monkeypatch.setattr(schema_inference, "propose_column",
                        spy("propose_column", schema_inference.propose_column))
    monkeypatch.setattr(normalization, "_column", spy("_column", normalization._column))
    return done


def refused(content: bytes, schema: Schema | None = None, **kw) -> str:
    with pytest.raises(DatasetError) as info:
        load_csv(content, filename="wide.csv", schema=schema, max_bytes=50_000_000, **kw)
    return str(info.value)


def test_the_spies_see_the_per_column_work_of_a_normal_file(calls):
    load_csv(b"a,b\n1,x\n2,y\n", filename="t.csv", schema=None, max_bytes=1_000)
    assert {"read_csv", "propose_column", "_column"} <= set(calls)


def test_100000_columns_are_refused_before_any_per_column_work(calls):
    header = ",".join(f"c{i}" for i in range(100_000))
    message = refused((header + "\n" + ",".join(["1"] * 100_000) + "\n").encode())
    assert "header row of 'wide.csv'" in message and "100,000 columns" in message
    assert "at most 64 KB" in message
    assert calls == []


def test_more_columns_than_the_cap_under_64_kb_are_refused_by_count(calls):
    n = MAX_COLUMNS + 1
    header = ",".join(f"c{i}" for i in range(n))
    assert len(header) < MAX_HEADER_BYTES
    message = refused((header + "\n" + ",".join(["1"] * n) + "\n").encode())
    assert f"has {n:,} columns; at most {MAX_COLUMNS:,}" in message
    assert calls == []


def test_the_column_cap_is_configurable(calls):
    message = refused(b"a,b,c\n1,2,3\n", max_columns=2)
    assert "has 3 columns; at most 2" in message and calls == []


def test_a_header_over_64_kb_is_reported_as_too_long_not_cut(calls):
    names = [f"{'very_long_column_name_' * 400}{i}" for i in range(8)]  # ~70 KB, 8 columns
    header = ";".join(names)
    assert len(header) > MAX_HEADER_BYTES
    message = refused((header + "\n" + ";".join(["1"] * 8) + "\n").encode())
    assert "KB long (about 8 columns)" in message and "shorter" not in message
    assert calls == []


def test_a_header_just_under_64_kb_loads_whole(calls):
    names = [f"{'n' * 8_000}{i}" for i in range(8)]  # 64,015 bytes
    header = ",".join(names)
    assert len(header) <= MAX_HEADER_BYTES
    frame, _, _ = load_csv((header + "\n" + ",".join(["1"] * 8) + "\n").encode(),
                           filename="t.csv", schema=None, max_bytes=1_000_000)
    assert list(frame.columns) == names


def test_too_many_categories_in_a_schema_file_are_refused_before_the_columns(calls, tmp_path):
    cats = [f"level{i}" for i in range(MAX_CATEGORIES + 1)]
    path = tmp_path / "t.schema.json"
    path.write_text(json.dumps({"name": "t", "columns": [
        {"name": "ward", "kind": "categorical", "categories": cats}]}))
    with pytest.raises(SchemaError, match=f"lists {MAX_CATEGORIES + 1:,} categories"):
        read_schema_file(path)
    assert "_column" not in calls and "propose_column" not in calls


# --- ragged rows --------------------------------------------------------------------------
def test_a_long_first_row_is_reported_not_cut(calls):
    message = refused(b"age,sex\n50,m,extra,more\n60,f\n")
    assert "more values than its header (2 columns): line 2" in message
    assert "nothing was loaded" in message and "_column" not in calls


def test_every_ragged_line_is_listed():
    rows = ["61,yes"] * 30
    for line in (5, 9, 20):
        rows[line - 2] = "61,yes,extra"
    message = refused(("age,bph\n" + "\n".join(rows) + "\n").encode())
    assert "lines 5, 9, 20." in message


def test_many_ragged_lines_are_summarised():
    rows = ["50,m,x"] * 25
    message = refused(("age,sex\n" + "\n".join(rows) + "\n").encode())
    assert "lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 15 more" in message


def test_an_extra_empty_field_is_named_as_a_trailing_separator():
    message = refused(b"a,b\n1,2\n3,4,\n")
    assert "ending with an extra separator" in message and "line 3" in message


def test_a_quoted_separator_is_not_ragged():
    frame, _, _ = load_csv(b'age,note\n50,"a, b, c"\n60,d\n', filename="t.csv", schema=None,
                           max_bytes=1_000)
    assert frame["note"].tolist() == ["a, b, c", "d"]


def test_ragged_line_numbers_count_the_excel_separator_line():
    message = refused(b"sep=;\nage;sex\n50;m\n60;f;extra\n")
    assert "line 4" in message
