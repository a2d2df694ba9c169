"""The registry's large datasets: big files as DuckDB sources, configured warehouse tables.

A mixin of ``DatasetRegistry`` (kept apart so the registry module stays about small files):
above ``large_file_bytes`` a configured CSV becomes a DuckDB/Parquet source, and every
``WarehouseSpec`` a PostgreSQL or Spark source. Their ``Dataset.frame`` is a capped sample
(``ROW_CAP`` rows) for row-based pages, read on first use (``LazySample``), never while the
registry loads; aggregates come from ``Dataset.data``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dp_engine.errors import DPError
from dp_engine.schema import Schema
from services.data.csv_loader import check_size, dataset_slug
from services.data.dataset import Dataset, Entry, write_json
from services.data.load_report import LoadReport
from services.data.schema_files import read_schema_file, write_schema_file
from services.data.sources.base import ROW_CAP
from services.data.sources.duckdb_source import DuckDBSettings
from services.data.sources.large import WarehouseSpec, open_large_csv, precompute_views
from services.data.sources.sample import LazySample

SAMPLE_NOTE = (f"Large dataset: row-based pages (paper mode, anonymizer, release studio) use a "
               f"seeded sample of at most {ROW_CAP:,} rows, read when one first needs it; "
               "sound-mode aggregates are computed on every row.")


class LargeDatasets:
    """Mixed into DatasetRegistry: needs ``storage_dir``, ``_entries`` and ``problems``."""

    storage_dir: Path
    problems: list[str]
    _entries: dict[str, Any]
    large_file_bytes: int | None = None
    duckdb_settings: DuckDBSettings = DuckDBSettings()

    def _is_large(self, path: Path) -> bool:
        limit = self.large_file_bytes
        return (limit is not None and path.suffix.lower() != ".parquet"
                and path.stat().st_size > limit)

    def _large_store(self) -> Path:
        return self.storage_dir / "parquet"

    def _add_large(self, path: Path, dataset_id: str, source: str,
                   schema: Schema | None) -> None:
        big = open_large_csv(path, self._large_store(), dataset_id, schema, self.duckdb_settings)
        override = self._schema_path(dataset_id, big.version)  # type: ignore[attr-defined]
        if override.exists() and read_schema_file(override) != big.schema:
            big.source.close()
            big = open_large_csv(path, self._large_store(), dataset_id,
                                 read_schema_file(override), self.duckdb_settings)
        if big.problem:
            self.problems.append(f"Configured dataset '{path}': {big.problem}")
        schema = replace(big.schema, dataset=dataset_id)
        ds = Dataset(dataset_id, schema.title or path.name, big.version, big.sample, schema,
                     _noted(big.report), source, path.name, data=big.source)
        self._entries[dataset_id] = Entry(ds, path, self._mtime(dataset_id, big.version))  # type: ignore[attr-defined]

    def _add_large_upload(self, filename: str, content: bytes, version: str) -> Any:
        """A large upload: raw bytes stored, streamed into Parquet, schema proposed."""
        check_size(content, filename, self.max_upload_bytes)  # type: ignore[attr-defined]
        uploads = self.storage_dir / "uploads"
        uploads.mkdir(parents=True, exist_ok=True)
        raw_path = uploads / f"{version}.csv"
        raw_path.write_bytes(content)
        dataset_id = self._free_id(dataset_slug(filename), version)  # type: ignore[attr-defined]
        big = open_large_csv(raw_path, self._large_store(), dataset_id, None,
                             self.duckdb_settings)
        schema = replace(big.schema, dataset=dataset_id, title=filename)
        write_schema_file(self._schema_path(dataset_id, version), schema)  # type: ignore[attr-defined]
        meta = {"id": dataset_id, "title": filename, "filename": filename}
        write_json(uploads / f"{version}.json", meta)
        return self._add_large_stored(meta, raw_path, schema, big)

    def _add_large_stored(self, meta: dict, raw_path: Path, schema: Schema,
                          big: Any = None) -> Any:
        """A stored large upload (this worker's or another's) as a DuckDB dataset."""
        big = big or open_large_csv(raw_path, self._large_store(), meta["id"], schema,
                                    self.duckdb_settings)
        ds = Dataset(meta["id"], meta["title"], big.version, big.sample,
                     replace(schema, dataset=meta["id"]), _noted(big.report), "upload",
                     meta["filename"], data=big.source)
        self._entries[ds.id] = Entry(ds, raw_path, self._mtime(ds.id, big.version))  # type: ignore[attr-defined]
        return ds

    def _reload_large(self, entry: Any, schema: Schema) -> Any:
        """Re-ingest with the edited schema (the Parquet holds values typed by the schema)."""
        ds = entry.dataset
        big = open_large_csv(entry.raw_path, self._large_store(), ds.id, schema,
                             self.duckdb_settings)
        ds.data.close()
        return replace(ds, table=big.sample, schema=replace(big.schema, dataset=ds.id),
                       load_report=_noted(big.report), data=big.source)

    def _add_warehouse(self, spec: WarehouseSpec) -> None:
        try:
            schema = replace(read_schema_file(spec.schema_file), dataset=spec.id)
            source = spec.open(self.storage_dir / "precomputed" / spec.identity)
            present = [n for n in schema.names if n in source.storage_kinds()]
            rows = source.row_count()  # a COUNT where the table lives; no row is read
            precompute_views(source, schema)  # DuckDB: the views' compact tables, at load
        except (OSError, DPError) as exc:
            self.problems.append(f"Warehouse table '{spec.id}' was not loaded: {exc}")
            return
        report = LoadReport(rows=rows, columns=len(present),
                            warnings=(SAMPLE_NOTE,) if rows > ROW_CAP else ())
        title = spec.title or schema.title or spec.id
        ds = Dataset(spec.id, title, spec.identity, LazySample(source, present, cap=ROW_CAP),
                     schema, report, "config", spec.table or spec.path or "", data=source)
        self._entries[spec.id] = Entry(ds, spec.schema_file, None)


def _noted(report: LoadReport) -> LoadReport:
    return replace(report, warnings=(*report.warnings, SAMPLE_NOTE))
