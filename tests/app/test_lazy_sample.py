"""Large datasets hold no rows until a row-based page asks (issue 14, worker memory).

A Parquet warehouse entry and a large CSV are registered while the app is built; building it,
answering sound-mode Explore views and listing the Data page read no row. The anonymizer and
the release studio read the capped sample on first use, once per process.
"""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from app import create_app
from callbacks import anonymize as anonymize_cb
from dp_engine.schema import ColumnRole
from layouts import ids
from layouts.anonymize import page as anonymize_page
from layouts.data.page import overview
from services.data.registry import SAMPLE_CSV, SAMPLE_SCHEMA, DatasetRegistry
from services.data.sources.duckdb_source import DuckDBSource
from services.data.sources.sample import LazySample
from services.identity.roles import Role
from services.identity.session import Identity
from services.views.queries import ViewRequest
from tests.app.parquet_support import frame_to_parquet
from tests.stand_ins import stand_in

OWNER = Identity("olga", Role.OWNER, True)


@pytest.fixture()
def reads(monkeypatch) -> list[tuple[str, ...]]:
    """Every ``DuckDBSource.read_rows`` call (its columns), in order."""
    calls: list[tuple[str, ...]] = []
    real = DuckDBSource.read_rows

    def counted(self, columns, **kw):
        calls.append(tuple(columns))
        return real(self, columns, **kw)

    monkeypatch.setattr(DuckDBSource, "read_rows", counted)
    return calls


@pytest.fixture()
def app(tmp_path, reads):
    """The app with 'cohort' a Parquet warehouse table and 'big' a CSV above the threshold."""
    files = tmp_path / "files"
    files.mkdir()
    rows = DatasetRegistry(tmp_path / "plain").get("pirads").frame
    parquet = frame_to_parquet(rows, files / "cohort.parquet")
    (files / "warehouse.json").write_text(json.dumps([
        {"id": "cohort", "backend": "duckdb", "path": str(parquet),
         "schema_file": str(SAMPLE_SCHEMA)}]), encoding="utf-8")
    shutil.copy(SAMPLE_CSV, files / "big.csv")
    shutil.copy(SAMPLE_SCHEMA, files / "big.schema.json")
    return create_app({"data_dir": tmp_path / "var", "large_file_bytes": 10_000,
                       "warehouse_file": files / "warehouse.json",
                       "dataset_paths": (files / "big.csv",)}, seed=3)


def test_building_the_app_and_sound_views_read_no_row(app, reads):
    services = app.server.extensions["cohort"]
    for dataset_id in ("cohort", "big"):
        ds = services.registry.get(dataset_id)
        assert isinstance(ds.data, DuckDBSource) and isinstance(ds.table, LazySample)
        for view in ("histogram", "mean", "median"):
            req = ViewRequest(dataset_id, view, "Age", "PIRADS score", "sound", Role.OWNER)
            ans = services.releases.answer(OWNER, req, price=True)
            assert any(v is not None for row in ans.values for v in row), (dataset_id, view)
        assert ds.row_count == 920                    # counted where the data lives
    listing = json.dumps(overview(services.registry.list(), []).to_plotly_json(), default=str)
    assert "920" in listing
    assert reads == []
    assert not any(d.table.loaded for d in services.registry.list()
                   if isinstance(d.table, LazySample))


def test_the_anonymizer_reads_the_sample_once_on_first_use(app, reads):
    services = app.server.extensions["cohort"]
    page = stand_in(registry=services.registry,
                    identity=SimpleNamespace(current=lambda: OWNER))
    schema = services.registry.get("cohort").schema
    anonymize_cb.handle_dataset(page, "cohort")                  # choosing it reads nothing
    assert reads == []
    for _ in range(2):
        out = anonymize_cb.handle_run(
            page, ids.AN_RUN, "cohort",
            anonymize_page.default_columns(schema, ColumnRole.QUASI_IDENTIFIER),
            anonymize_page.default_columns(schema, ColumnRole.SENSITIVE), 5, "hybrid",
            "flatten", "Age", "Year", None, rng=np.random.default_rng(7))
        assert out[3] and out[3]["csv"].count("\n") > 900     # every row anonymized
    assert reads == [tuple(schema.names)]                       # one read, then kept
    assert len(services.registry.get("cohort").frame) == 920


def test_the_studio_reads_the_large_csv_sample_when_it_needs_rows(app, reads):
    services = app.server.extensions["cohort"]
    assert services.studio.problems(OWNER, "big", []) == {}
    assert len(reads) == 1
    ds = services.registry.get("big")
    assert ds.table.loaded and len(ds.frame) == 920 and list(ds.frame.columns) == ds.schema.names
    assert len(reads) == 1
