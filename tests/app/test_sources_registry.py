"""Large files and warehouse tables in the registry; configuration; gzip; the row cap."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from dataclasses import replace

import numpy as np
import pytest
import sqlalchemy as sa

from services.config import AppConfig
from services.data.registry import SAMPLE_CSV, SAMPLE_SCHEMA, DatasetRegistry, content_version
from services.data.sources import AggregateQuery
from services.data.sources.duckdb_source import DuckDBSource
from services.data.sources.large import WarehouseSpec, read_warehouse_file
from services.data.sources.memory import PandasSource
from services.data.sources.resolve import aggregates, aggregates_many, read_rows, source_of

PG_URL = os.environ.get("TEST_DATABASE_URL")
PG_SCHEMA = "w1_sources_registry"


@pytest.fixture()
def big_sample(tmp_path):
    """The sample cohort configured as a file above a (tiny) large-file threshold."""
    data = tmp_path / "files"
    data.mkdir()
    shutil.copy(SAMPLE_CSV, data / "cohort.csv")
    shutil.copy(SAMPLE_SCHEMA, data / "cohort.schema.json")
    return data / "cohort.csv"


def _registry(tmp_path, paths=(), **kw) -> DatasetRegistry:
    return DatasetRegistry(tmp_path / "store", extra_paths=paths, large_file_bytes=10_000, **kw)


def test_a_large_file_becomes_a_duckdb_source_with_the_same_aggregates(tmp_path, big_sample):
    reg = _registry(tmp_path, [big_sample])
    big, small = reg.get("cohort"), reg.get("pirads")
    assert isinstance(big.data, DuckDBSource) and small.data is None
    assert isinstance(source_of(small), PandasSource)
    assert big.version == content_version(big_sample.read_bytes())  # hashed while streaming
    assert big.load_report.rows == 920 and any("sample" in w for w in big.load_report.warnings)
    queries = [AggregateQuery.histogram(small.schema, "Age", "PIRADS score"),
               AggregateQuery.moments(small.schema, "Age", "BPH", squares=True),
               AggregateQuery.candidates(small.schema, "Gleason score"),
               AggregateQuery.count(small.schema)]
    for want, have in zip(aggregates_many(small, queries), aggregates_many(big, queries),
                          strict=True):
        for name, value in vars(want).items():
            np.testing.assert_array_equal(getattr(have, name), value)
    assert int(aggregates(big, queries[-1]).counts.sum()) == 920


def test_a_second_worker_reuses_the_parquet_and_the_hash(tmp_path, big_sample):
    first = _registry(tmp_path, [big_sample]).get("cohort")
    parts = sorted((tmp_path / "store" / "parquet").rglob("*.parquet"))
    again = _registry(tmp_path, [big_sample]).get("cohort")
    assert again.version == first.version
    assert sorted((tmp_path / "store" / "parquet").rglob("*.parquet")) == parts
    assert all(p.stat().st_mtime_ns == q.stat().st_mtime_ns for p, q in zip(
        parts, sorted((tmp_path / "store" / "parquet").rglob("*.parquet")), strict=True))


def test_schema_edit_of_a_large_dataset_is_applied_to_every_row(tmp_path, big_sample):
    reg = _registry(tmp_path, [big_sample])
    ds = reg.get("cohort")
    ages = int(ds.frame["Age"].notna().sum())  # read before the edit closes its source
    narrow = replace(ds.schema.column("Age"), lower=50, upper=70, bin_width=10)
    edited = reg.update_schema("cohort", ds.schema.with_column(narrow))
    q = AggregateQuery.histogram(edited.schema, "Age")
    counts = aggregates(edited, q).counts
    assert counts.shape == (1, 2) and int(counts.sum()) == ages


def test_a_large_upload_is_streamed_to_parquet_and_seen_by_other_workers(tmp_path):
    content = SAMPLE_CSV.read_bytes().replace(b",UROL,", b",RADI,")  # another file
    reg = _registry(tmp_path)
    ds = reg.add_upload("Big export.csv", content)
    assert isinstance(ds.data, DuckDBSource) and ds.id == "big-export"
    assert ds.version == content_version(content)
    assert ds.schema.flagged_columns() or not ds.schema.confirmed  # proposed, not confirmed
    other = _registry(tmp_path).get("big-export")  # a second worker finds it on disk
    assert isinstance(other.data, DuckDBSource) and other.version == ds.version
    q = AggregateQuery.count(ds.schema)
    assert int(aggregates(other, q).counts.sum()) == 920
    assert reg.add_upload("again.csv", content) is ds


def test_row_reader_caps_and_samples_reproducibly(tmp_path, big_sample):
    ds = _registry(tmp_path, [big_sample]).get("cohort")
    whole = read_rows(ds, ["Age", "BPH"])
    assert not whole.sampled and len(whole.frame) == 920 and whole.note == ""
    part = read_rows(ds, ["Age", "BPH"], cap=100, seed=4)
    assert part.sampled and len(part.frame) == 100 and "100" in part.note
    assert part.frame.equals(read_rows(ds, ["Age", "BPH"], cap=100, seed=4).frame)
    mem = read_rows(_registry(tmp_path).get("pirads"), ["Age"], cap=50, seed=1)
    assert mem.sampled and len(mem.frame) == 50


def test_config_reads_the_new_variables(tmp_path):
    wh = tmp_path / "warehouse.json"
    cfg = AppConfig.from_env({"COHORT_LARGE_FILE_MB": "2.5", "COHORT_WAREHOUSE": str(wh),
                              "COHORT_DUCKDB_MEMORY": "300MB"})
    assert cfg.large_file_bytes == 2_500_000 and cfg.warehouse_file == wh
    assert cfg.duckdb_memory == "300MB"
    assert AppConfig.from_env({}).warehouse_file is None


def test_warehouse_file_keeps_passwords_out_of_the_version(tmp_path, monkeypatch):
    monkeypatch.setenv("W1_URL", "postgresql+psycopg://reader:secret@db.example/warehouse")
    path = tmp_path / "wh.json"
    path.write_text(json.dumps([{"id": "reports", "backend": "postgres", "url_env": "W1_URL",
                                 "table": "mri", "schema_file": "mri.schema.json"}]))
    (spec,) = read_warehouse_file(path)
    assert spec.url.endswith("/warehouse") and spec.schema_file == tmp_path / "mri.schema.json"
    other = replace(spec, url="postgresql+psycopg://reader:changed@db.example/warehouse")
    assert spec.identity == other.identity  # a password change is not a new dataset version
    assert spec.identity != replace(spec, version="2026-12").identity


def test_a_broken_warehouse_entry_is_reported_not_fatal(tmp_path):
    spec = WarehouseSpec(id="nowhere", backend="postgres", schema_file=SAMPLE_SCHEMA,
                         url="postgresql+psycopg://nobody@127.0.0.1:1/none", table="t")
    reg = _registry(tmp_path, warehouse=[spec])
    assert [d.id for d in reg.list()] == ["pirads"]
    assert any("nowhere" in p for p in reg.problems)


def test_postgres_warehouse_table_is_registered_and_read_only(tmp_path):
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("CI=true but TEST_DATABASE_URL is not set")
        pytest.skip("TEST_DATABASE_URL is not set")
    sample = DatasetRegistry(tmp_path / "plain").get("pirads")
    engine = sa.create_engine(PG_URL)
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(PG_SCHEMA, if_not_exists=True))
    try:
        sample.frame.to_sql("reports", engine, schema=PG_SCHEMA, index=False,
                            if_exists="replace")
        spec = WarehouseSpec(id="reports", backend="postgres", schema_file=SAMPLE_SCHEMA,
                             url=PG_URL, table="reports", schema_name=PG_SCHEMA)
        ds = _registry(tmp_path, warehouse=[spec]).get("reports")
        q = AggregateQuery.moments(ds.schema, "Age", "Prostatitis", squares=True)
        want, have = aggregates(sample, q), aggregates(ds, q)
        np.testing.assert_array_equal(have.s2, want.s2)
        with pytest.raises(sa.exc.DBAPIError, match="read-only"), ds.data.engine.connect() as c:
            c.execute(sa.text(f'DELETE FROM "{PG_SCHEMA}".reports'))
        ds.data.close()
    finally:
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(PG_SCHEMA, cascade=True, if_exists=True))
        engine.dispose()


def test_first_page_is_gzipped_under_one_megabyte(tmp_path):
    from app import create_app

    client = create_app({"data_dir": tmp_path}).server.test_client()
    gz = {"Accept-Encoding": "gzip"}
    page = client.get("/", headers=gz)
    html = gzip.decompress(page.data).decode()
    urls = re.findall(r'src="(/[^"]+)"', html) + re.findall(r'href="(/[^"]+\.css[^"]*)"', html)
    urls += ["/_dash-layout", "/_dash-dependencies"]
    wire = len(page.data)
    for url in urls:
        resp = client.get(url, headers=gz)
        assert resp.status_code == 200, url
        if len(resp.data) > 2000:
            assert resp.headers.get("Content-Encoding") == "gzip", url
            assert gzip.decompress(resp.data) == client.get(url).data, url
        wire += len(resp.data)
    assert len(urls) > 5 and wire <= 1_000_000
