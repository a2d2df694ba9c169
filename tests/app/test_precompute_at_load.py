"""A large dataset's compact tables are built when it is loaded, not on a view's first request
(issue 20 item 2).

Per dataset version, every view column alone and with every grouping column gets its table of
records per distinct combination at load, so an uncached view, the first one after a load
included, reads those tables instead of scanning every row. The size limits are patched small
so each branch runs on a few thousand rows: a precomputed hit, a miss (a column set the load
did not build: built on its first request, as before), a set with too many combinations (its
views read the data), the rollup table too large (each set grouped from the data), and a new
version of the file with its own tables. Every answer read from a precomputed table equals
the answer from the raw data exactly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from layouts.explore.page import group_options
from services.data.registry import SAMPLE_SCHEMA, read_schema_file
from services.data.sources import duckdb_source
from services.data.sources.duckdb_source import DuckDBSource
from services.data.sources.large import grouping_columns, open_large_csv, view_column_sets
from services.data.sources.query import AggregateQuery as Q

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3_000


def _csv(path: Path, rows: int = ROWS, seed: int = 11) -> Path:
    sys.path.insert(0, str(ROOT / "sample_data"))
    import generate

    path.write_bytes(generate.to_csv_bytes(generate.generate(seed, rows)))
    return path


def _views(schema) -> list:
    """One query per kind of Explore view, grouped and not (as bench_warehouse times them)."""
    return [Q.histogram(schema, "Age", "PIRADS score"),
            Q.count(schema, "PIRADS score", require=("Age",)),
            Q.histogram(schema, "Prostatitis"),
            Q.moments(schema, "Age", "Therapy"),
            Q.moments(schema, "Gleason score", squares=True),
            Q.candidates(schema, "Age", "BPH"),
            Q.histogram(schema, "Therapy", "BPH"),
            Q.count(schema)]                      # the DP count: any table's counts sum to n


def _same(a, b) -> None:
    assert type(a) is type(b)
    for name, va in vars(a).items():
        vb = getattr(b, name)
        if va is None:
            assert vb is None, name
        else:
            np.testing.assert_array_equal(np.asarray(vb), np.asarray(va), err_msg=name)
            assert np.asarray(vb).dtype == np.asarray(va).dtype, name


class _Spy:
    """The tables each statement of a source read (the data view or a compact table)."""

    def __init__(self, source: DuckDBSource, monkeypatch) -> None:
        self.statements: list[str] = []
        fetch = source._fetch

        def spy(stmt):
            self.statements.append(str(stmt))
            return fetch(stmt)

        monkeypatch.setattr(source, "_fetch", spy)

    def read_data(self) -> bool:
        return any(f'FROM "{duckdb_source.VIEW}"' in s for s in self.statements)


@pytest.fixture
def loaded(tmp_path):
    schema = read_schema_file(SAMPLE_SCHEMA)
    big = open_large_csv(_csv(tmp_path / "cohort.csv"), tmp_path / "store", "cohort", schema)
    raw = DuckDBSource(big.source.path)
    yield big, raw, schema
    big.source.close()
    raw.close()


def test_load_builds_every_view_column_set(loaded):
    big, _, schema = loaded
    sets = view_column_sets(schema)
    groups = grouping_columns(schema)
    assert groups == [o["value"] for o in group_options(schema)[1:]]   # the Explore list
    views = [c.name for c in schema.queryable_columns()]
    expected = {(c,) for c in views} | {tuple(sorted((c, g))) for c in views for g in groups
                                         if g != c}
    assert set(sets) == expected and len(sets) == len(expected) == 13 + 77  # sample schema
    assert ("Age",) in sets and ("Age", "PIRADS score") in sets and ("BPH", "Therapy") in sets
    assert big.precomputed.built == len(sets) and big.precomputed.too_large == 0
    files = list(big.source.precompute_dir.glob("*.parquet"))
    assert len(files) == len(sets)


def test_first_request_after_load_reads_the_tables_and_equals_the_data(loaded, monkeypatch):
    big, raw, schema = loaded
    # a fresh source on the same version: a worker that starts after the load
    fresh = DuckDBSource(big.source.path, precompute_dir=big.source.precompute_dir)
    again = fresh.precompute(view_column_sets(schema))
    assert (again.built, again.kept) == (0, len(view_column_sets(schema)))
    spy = _Spy(fresh, monkeypatch)
    for query in _views(schema):
        _same(fresh.aggregate(query), raw.aggregate(query))
    assert spy.statements and not spy.read_data()
    assert fresh.row_count() == raw.row_count() == ROWS
    fresh.close()


def test_a_set_the_load_did_not_build_is_built_on_first_request(loaded, monkeypatch):
    big, raw, schema = loaded
    before = set(big.source.precompute_dir.glob("*.parquet"))
    query = Q.count(schema, "BPH", require=("Age", "PIRADS score"))  # three columns: a miss
    spy = _Spy(big.source, monkeypatch)
    _same(big.source.aggregate(query), raw.aggregate(query))
    assert len(set(big.source.precompute_dir.glob("*.parquet")) - before) == 1
    assert not spy.read_data()


def test_too_many_combinations_read_the_data(tmp_path, monkeypatch):
    """Age has hundreds of distinct values: above a limit of 60 its sets are not kept."""
    monkeypatch.setattr(duckdb_source, "COMPACT_MAX_ROWS", 60)
    schema = read_schema_file(SAMPLE_SCHEMA)
    big = open_large_csv(_csv(tmp_path / "cohort.csv"), tmp_path / "store", "cohort", schema)
    raw = DuckDBSource(big.source.path)
    age_sets = [k for k in view_column_sets(schema) if "Age" in k]
    assert big.precomputed.too_large >= len(age_sets)
    assert big.precomputed.built + big.precomputed.too_large == len(view_column_sets(schema))
    assert list(big.source.precompute_dir.glob("*.skip"))
    spy = _Spy(big.source, monkeypatch)
    q_age = Q.histogram(schema, "Age", "PIRADS score")
    _same(big.source.aggregate(q_age), raw.aggregate(q_age))
    assert spy.read_data()
    spy.statements.clear()
    q_few = Q.histogram(schema, "Therapy", "BPH")
    _same(big.source.aggregate(q_few), raw.aggregate(q_few))
    assert not spy.read_data()
    big.source.close()
    raw.close()


def test_rollup_too_large_groups_each_set_from_the_data(tmp_path, monkeypatch):
    monkeypatch.setattr(duckdb_source, "ROLLUP_MAX_ROWS", 10)
    schema = read_schema_file(SAMPLE_SCHEMA)
    big = open_large_csv(_csv(tmp_path / "cohort.csv"), tmp_path / "store", "cohort", schema)
    raw = DuckDBSource(big.source.path)
    assert big.precomputed.built == len(view_column_sets(schema))
    spy = _Spy(big.source, monkeypatch)
    for query in _views(schema):
        _same(big.source.aggregate(query), raw.aggregate(query))
    assert not spy.read_data()
    big.source.close()
    raw.close()


def test_a_new_version_gets_its_own_tables(tmp_path):
    schema = read_schema_file(SAMPLE_SCHEMA)
    path, store = _csv(tmp_path / "cohort.csv"), tmp_path / "store"
    first = open_large_csv(path, store, "cohort", schema)
    first_files = {p: p.read_bytes() for p in first.source.precompute_dir.glob("*.parquet")}
    _csv(path, ROWS + 500, seed=12)   # the file changes: a new version
    second = open_large_csv(path, store, "cohort", schema)
    assert second.version != first.version
    assert second.source.precompute_dir != first.source.precompute_dir
    assert second.precomputed.built == len(view_column_sets(schema))
    assert {p: p.read_bytes() for p in first.source.precompute_dir.glob("*.parquet")} \
        == first_files
    raw = DuckDBSource(second.source.path)
    query = Q.histogram(schema, "Age", "PIRADS score")
    got = second.source.aggregate(query)
    _same(got, raw.aggregate(query))
    assert int(np.sum(got.counts)) > int(np.sum(first.source.aggregate(query).counts))
    for src in (first.source, second.source, raw):
        src.close()


def test_a_patient_bounded_schema_builds_nothing(tmp_path):
    """Bounded views read the patient's id too: its combinations are never compact."""
    from dataclasses import replace

    schema = replace(read_schema_file(SAMPLE_SCHEMA), patient_column="Anonym_ID",
                     max_rows_per_patient=2)
    assert view_column_sets(schema) == []
    big = open_large_csv(_csv(tmp_path / "cohort.csv"), tmp_path / "store", "cohort", schema)
    assert big.precomputed.sets == 0
    big.source.close()


def test_a_parquet_warehouse_entry_builds_its_tables_when_the_registry_loads(tmp_path,
                                                                             monkeypatch):
    from services.data.registry import DatasetRegistry
    from services.data.sources.large import WarehouseSpec

    schema = read_schema_file(SAMPLE_SCHEMA)
    big = open_large_csv(_csv(tmp_path / "cohort.csv"), tmp_path / "store", "cohort", schema)
    spec = WarehouseSpec(id="cohort", backend="duckdb", schema_file=SAMPLE_SCHEMA,
                         path=big.source.path)
    registry = DatasetRegistry(tmp_path / "var", sample=False, warehouse=[spec])
    source = registry.get("cohort").data
    assert source.precompute_dir == tmp_path / "var" / "precomputed" / spec.identity
    assert len(list(source.precompute_dir.glob("*.parquet"))) == len(view_column_sets(schema))
    spy = _Spy(source, monkeypatch)
    query = Q.moments(schema, "Age", "Therapy")
    _same(source.aggregate(query), big.source.aggregate(query))
    assert not spy.read_data()
    big.source.close()
