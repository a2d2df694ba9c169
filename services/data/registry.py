"""The dataset registry: the sample cohort, configured files and the owner's uploads.

Datasets are versioned by a hash of their raw bytes (the privacy ledger keys on it). Uploads
and the owner's schema edits are stored under ``storage_dir`` so they survive a restart and
are seen by every worker process (each call re-scans the directory cheaply). A bad upload
raises DatasetError and leaves every loaded dataset as it was.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from dp_engine.errors import DPError, SchemaError
from dp_engine.schema import Schema
from services.data.csv_loader import dataset_slug, load_csv
from services.data.dataset import Dataset, Entry, content_version, write_json
from services.data.errors import DatasetError, UnknownDatasetError
from services.data.limits import MAX_COLUMNS, RARE_LEVEL_MIN
from services.data.load_report import LoadReport
from services.data.normalization import apply_schema
from services.data.schema_files import read_schema_file, write_schema_file
from services.data.schema_inference import PROPOSED_NOTE, propose_schema
from services.data.sources.duckdb_source import DuckDBSettings
from services.data.sources.large import WarehouseSpec
from services.data.sources.registry_large import LargeDatasets

__all__ = [
    "SAMPLE_CSV", "SAMPLE_ID", "SAMPLE_SCHEMA", "Dataset", "DatasetError", "DatasetRegistry",
    "LoadReport", "UnknownDatasetError", "load_csv", "propose_schema", "read_schema_file",
    "write_schema_file",
]

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
SAMPLE_CSV = SAMPLE_DIR / "pirads_cohort.csv"
SAMPLE_SCHEMA = SAMPLE_DIR / "pirads_cohort.schema.json"
SAMPLE_ID = "pirads"
NO_LIMIT = 1 << 40  # configured files are the owner's own: no upload limit


class DatasetRegistry(LargeDatasets):
    """Every dataset the app can show, the sample cohort first."""

    def __init__(
        self,
        storage_dir: Path,
        *,
        max_upload_bytes: int = 50_000_000,
        sample: bool = True,
        extra_paths: Sequence[Path] = (),
        max_columns: int = MAX_COLUMNS,
        rare_level_min: int = RARE_LEVEL_MIN,
        large_file_bytes: int | None = None,
        warehouse: Sequence[WarehouseSpec] = (),
        duckdb_settings: DuckDBSettings | None = None,
    ) -> None:
        self.storage_dir = Path(storage_dir)
        self.large_file_bytes = large_file_bytes  # above it a file becomes a DuckDB source
        self.duckdb_settings = duckdb_settings or DuckDBSettings()
        self.max_upload_bytes = int(max_upload_bytes)
        self.max_columns = int(max_columns)
        self.rare_level_min = int(rare_level_min)  # see services.data.limits.RARE_LEVEL_MIN
        self.problems: list[str] = []  # configured files that could not be loaded (owner-only)
        self.on_confirm: list = []     # called with each dataset the owner confirms
        self._uploads = self.storage_dir / "uploads"
        self._schemas = self.storage_dir / "schemas"
        self._lock = threading.RLock()
        self._entries: dict[str, Entry] = {}
        if sample:
            self._add_file(SAMPLE_CSV, SAMPLE_ID, "sample", read_schema_file(SAMPLE_SCHEMA))
        for path in extra_paths:
            self._add_configured(Path(path))
        for spec in warehouse:
            self._add_warehouse(spec)
        self._sync()

    # --- reading -------------------------------------------------------------------
    def list(self) -> list[Dataset]:
        with self._lock:
            self._sync()
            return [e.dataset for e in self._entries.values()]

    def get(self, dataset_id: str, *, owner: bool = True) -> Dataset:
        """The dataset; for a non-owner (``owner=False``) an unconfirmed one does not exist.

        Unknown and unconfirmed get one answer, so a non-owner cannot probe upload names.
        """
        with self._lock:
            self._sync()
            entry = self._entries.get(str(dataset_id))
            if entry is None or not (owner or entry.dataset.schema.confirmed):
                # No list of the others: this message reaches every role, and an unconfirmed
                # upload's id (a slug of its file name) is not theirs to see.
                raise UnknownDatasetError(
                    f"There is no dataset '{dataset_id}'; choose one from the dataset list."
                )
            return entry.dataset

    # --- changing ------------------------------------------------------------------
    def add_upload(self, filename: str, content: bytes) -> Dataset:
        """Validate, type and store an uploaded CSV; returns it with a proposed schema."""
        filename = Path(str(filename or "upload.csv")).name
        if not isinstance(content, bytes | bytearray):
            raise DatasetError("The upload was empty or unreadable; choose the file again.")
        content = bytes(content)
        version = content_version(content)
        with self._lock:
            self._sync()
            for entry in self._entries.values():
                if entry.dataset.version == version:
                    return entry.dataset
            if self.large_file_bytes is not None and len(content) > self.large_file_bytes:
                return self._add_large_upload(filename, content, version)
            frame, schema, report = self._load(content, filename, None, self.max_upload_bytes)
            dataset_id = self._free_id(dataset_slug(filename), version)
            schema = replace(schema, dataset=dataset_id, title=filename)
            raw_path = self._uploads / f"{version}.csv"
            self._uploads.mkdir(parents=True, exist_ok=True)
            raw_path.write_bytes(content)
            write_schema_file(self._schema_path(dataset_id, version), schema)
            meta = {"id": dataset_id, "title": filename, "filename": filename}
            write_json(self._uploads / f"{version}.json", meta)  # last: marks it complete
            ds = Dataset(dataset_id, filename, version, frame, schema, report, "upload", filename)
            self._entries[dataset_id] = Entry(ds, raw_path, self._mtime(dataset_id, version))
            return ds

    def update_schema(self, dataset_id: str, schema: Schema) -> Dataset:
        """Store the owner's edited schema (unconfirmed) and re-apply it to the raw file."""
        with self._lock:
            entry = self._entries.get(dataset_id) or self._missing(dataset_id)
            current = entry.dataset
            if sorted(schema.names) != sorted(current.schema.names):
                raise SchemaError(
                    "The edited schema must describe exactly the dataset's columns: "
                    f"{', '.join(current.schema.names)}."
                )
            order = {name: i for i, name in enumerate(current.schema.names)}
            columns = tuple(sorted(schema.columns, key=lambda c: order[c.name]))
            schema = replace(schema, dataset=current.schema.dataset, columns=columns,
                             confirmed=False, title=current.schema.title)
            ds = self._reload(entry, schema)
            self._store_schema(entry, ds)
            return ds

    def confirm_columns(self, dataset_id: str, names: Sequence[str]) -> Dataset:
        """The owner's approval of named columns' data-derived metadata, one column at a time.

        The schema stays unconfirmed (not public) until ``confirm_schema``.
        """
        with self._lock:
            entry = self._entries.get(dataset_id) or self._missing(dataset_id)
            schema = entry.dataset.schema.confirm_columns(list(names))
            return self.update_schema(dataset_id, schema)

    def confirm_schema(self, dataset_id: str) -> Dataset:
        """The owner's approval: non-owners may now query the dataset.

        The single place a schema becomes confirmed (the Data page's Confirm calls it once
        the owner's ticks and edits left nothing unconfirmed). Refused (SchemaError) while a
        column or the rows-per-patient bound is still flagged as read off the data.
        """
        with self._lock:
            entry = self._entries.get(dataset_id) or self._missing(dataset_id)
            schema = entry.dataset.schema.confirm()
            notes = tuple(n for n in schema.notes if not n.startswith(PROPOSED_NOTE))
            ds = replace(entry.dataset, schema=replace(schema, notes=notes))
            self._store_schema(entry, ds)
        for hook in self.on_confirm:   # e.g. the version's privacy calibration, drawn once
            hook(ds)
        return ds

    # --- internals -----------------------------------------------------------------
    def _missing(self, dataset_id: str) -> Entry:
        self.get(dataset_id)  # raises UnknownDatasetError with the list of ids
        raise AssertionError("unreachable")

    def _schema_path(self, dataset_id: str, version: str) -> Path:
        return self._schemas / f"{dataset_id}.{version}.schema.json"

    def _mtime(self, dataset_id: str, version: str) -> float | None:
        return _mtime_of(self._schema_path(dataset_id, version))

    def _store_schema(self, entry: Entry, ds: Dataset) -> None:
        write_schema_file(self._schema_path(ds.id, ds.version), ds.schema)
        entry.dataset = ds
        entry.schema_mtime = self._mtime(ds.id, ds.version)

    def _free_id(self, slug: str, version: str) -> str:
        if slug == SAMPLE_ID or slug in self._entries:
            slug = f"{slug}-{version[:6]}"
        return slug

    def _load(self, content: bytes, filename: str, schema: Schema | None, max_bytes: int):
        return load_csv(content, filename=filename, schema=schema, max_bytes=max_bytes,
                        max_columns=self.max_columns, rare_level_min=self.rare_level_min)

    def _reload(self, entry: Entry, schema: Schema) -> Dataset:
        ds = entry.dataset
        if ds.data is not None:
            return self._reload_large(entry, schema)
        if entry.raw_path.suffix.lower() == ".parquet":
            frame, schema, report = apply_schema(
                _read_parquet(entry.raw_path), schema, filename=entry.raw_path.name,
                rare_level_min=self.rare_level_min,
            )
        else:
            frame, schema, report = self._load(entry.raw_path.read_bytes(),
                                               ds.filename or entry.raw_path.name, schema,
                                               NO_LIMIT)
        return replace(ds, table=frame, schema=schema, load_report=report)

    def _add_file(self, path: Path, dataset_id: str, source: str, schema: Schema | None) -> None:
        if source != "sample" and self._is_large(path):
            return self._add_large(path, dataset_id, source, schema)
        content = path.read_bytes()
        version = content_version(content)
        override = self._schema_path(dataset_id, version)
        if override.exists():
            schema = read_schema_file(override)
        if path.suffix.lower() == ".parquet":
            raw = _read_parquet(path)
            schema = schema or propose_schema(raw, dataset_id)
            frame, schema, report = apply_schema(raw, schema, filename=path.name,
                                                 rare_level_min=self.rare_level_min)
        else:
            frame, schema, report = self._load(content, path.name, schema, NO_LIMIT)
        schema = replace(schema, dataset=dataset_id)
        title = schema.title or path.name
        ds = Dataset(dataset_id, title, version, frame, schema, report, source, path.name)
        self._entries[dataset_id] = Entry(ds, path, self._mtime(dataset_id, version))

    def _add_configured(self, path: Path) -> None:
        sidecar = path.with_name(f"{path.stem}.schema.json")
        try:
            schema = read_schema_file(sidecar) if sidecar.exists() else None
            dataset_id = self._free_id(dataset_slug(path.name), "config")
            self._add_file(path, dataset_id, "config", schema)
        except OSError as exc:
            self.problems.append(f"Configured dataset '{path}' could not be read: {exc}.")
        except DPError as exc:
            self.problems.append(f"Configured dataset '{path}' was not loaded: {exc}")

    def _sync(self) -> None:
        """Pick up uploads and schema edits made by other worker processes."""
        with self._lock:
            for entry in self._entries.values():
                ds = entry.dataset
                mtime = self._mtime(ds.id, ds.version)
                if mtime is not None and mtime != entry.schema_mtime:
                    try:
                        schema = read_schema_file(self._schema_path(ds.id, ds.version))
                        entry.dataset = self._reload(entry, schema)
                    except (OSError, DPError):
                        pass  # keep the dataset as it was; the writer saw its own error
                    entry.schema_mtime = mtime
            if not self._uploads.is_dir():
                return
            known = {e.dataset.version for e in self._entries.values()}
            uploads = sorted(self._uploads.glob("*.json"), key=lambda p: _mtime_of(p) or 0.0)
            for meta_path in uploads:
                if meta_path.stem not in known:
                    self._load_stored_upload(meta_path)

    def _load_stored_upload(self, meta_path: Path) -> None:
        version = meta_path.stem
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            raw_path = self._uploads / f"{version}.csv"
            schema = read_schema_file(self._schema_path(meta["id"], version))
            if self._is_large(raw_path):
                return self._add_large_stored(meta, raw_path, schema)
            frame, schema, report = self._load(raw_path.read_bytes(), meta["filename"], schema,
                                               NO_LIMIT)
        except (OSError, KeyError, ValueError):
            return  # half-written by another worker; picked up on a later call
        ds = Dataset(meta["id"], meta["title"], version, frame, schema, report, "upload",
                     meta["filename"])
        self._entries[ds.id] = Entry(ds, raw_path, self._mtime(ds.id, version))


def _mtime_of(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except ImportError as exc:
        raise DatasetError(
            f"'{path.name}' is a Parquet file, which needs the optional 'pyarrow' package "
            "(not installed). Install it, or export the table as CSV."
        ) from exc
    except (OSError, ValueError) as exc:
        raise DatasetError(f"'{path.name}' is not a readable Parquet file ({exc}).") from exc
