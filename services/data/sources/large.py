"""Large files and warehouse tables as registry datasets: a DataSource plus a capped sample.

Above ``large_file_bytes`` a CSV is streamed into Parquet once (``ingest``) and queried with
DuckDB. Sound-mode Explore views never read rows: they are released from the source's exact
aggregates over every row (``services/views``). The pages that need rows (the anonymizer,
the release studio; paper mode reads its own capped sample) get the dataset's ``frame``: a
seeded sample of at most ``ROW_CAP`` rows read on their first use (``LazySample``), never at
startup, and they say so. The file's
version (SHA-256 of its bytes) is remembered by size and modification time, so a restart or
another worker does not hash gigabytes again.

Warehouse sources (PostgreSQL, Spark) come from a JSON file named by ``COHORT_WAREHOUSE``::

    [{"id": "mri-reports", "backend": "postgres", "url_env": "WAREHOUSE_URL",
      "table": "mri_reports", "schema_name": "radiology",
      "schema_file": "mri_reports.schema.json", "version": "2026-11-01"},
     {"id": "network", "backend": "spark", "master": "spark://spark-master:7077",
      "table": "warehouse.mri_reports", "schema_file": "network.schema.json"}]

``url_env`` names an environment variable holding the URL (keeps passwords out of files;
``url`` is accepted too). ``version`` must change when the table's content changes: cached
answers are reused per version.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dp_engine.schema import Schema
from services.data.dataset import write_json
from services.data.errors import DatasetError
from services.data.load_report import LoadReport
from services.data.sources.base import ROW_CAP, DataSource
from services.data.sources.duckdb_source import DuckDBSettings, DuckDBSource, Precomputed
from services.data.sources.ingest import ingest_csv, previous, stored
from services.data.sources.sample import LazySample
from services.lazy import lazy

duckdb = lazy("duckdb")  # loaded on first use: not at app start

_version_lock = threading.Lock()
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LargeDataset:
    """What the registry needs to list a dataset it does not hold in memory."""

    version: str
    schema: Schema
    report: LoadReport
    source: DataSource
    sample: LazySample = field(repr=False)   # read on first use, never here
    problem: str | None = None               # a newer version was refused; this one kept
    precomputed: Precomputed = Precomputed()  # compact tables built (or found) at load


def cached_version(path: Path, cache_dir: Path) -> str:
    """SHA-256 version of a file, computed once per (size, mtime) and remembered on disk."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    cache = cache_dir / "versions.json"
    with _version_lock:
        try:
            known = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        if key in known:
            return str(known[key])
        with path.open("rb") as fh:
            known[key] = hashlib.file_digest(fh, "sha256").hexdigest()[:16]
        write_json(cache, known)
        return str(known[key])


def open_large_csv(path: Path, store: Path, dataset_id: str, schema: Schema | None,
                   settings: DuckDBSettings | None = None) -> LargeDataset:
    """The file as a DuckDB source (ingested on first use) and its capped sample, unread."""
    version = cached_version(path, store)
    done = stored(store, version, schema) if schema is not None else None
    problem = None
    if done is None:
        try:
            done = ingest_csv(path, store, schema=schema, dataset_id=dataset_id)
        except DatasetError as exc:   # keep serving the last version that loaded whole
            done = previous(store, path, schema)
            if done is None:
                raise
            problem = (f"{exc} The version loaded before ({done.version}) is still the one "
                       "shown.")
    source = DuckDBSource(done.glob, settings or DuckDBSettings(),
                          precompute_dir=done.parquet / "precomputed")
    return LargeDataset(done.version, done.schema, done.report, source,
                        LazySample(source, done.schema.names, cap=ROW_CAP), problem,
                        precompute_views(source, done.schema))


def view_column_sets(schema: Schema) -> list[tuple[str, ...]]:
    """The column sets an uncached Explore view reads: each view column alone and with each
    grouping column (a histogram, mean, box plot and their group sizes read no more).

    None when a patient column bounds each patient's rows: those views also read the
    patient's id, whose combinations are as many as the patients (never compact).
    """
    if schema.patient_column is not None:
        return []
    groups = grouping_columns(schema)
    sets: dict[tuple[str, ...], None] = {}
    for spec in schema.queryable_columns():
        sets[(spec.name,)] = None
        for g in groups:
            if g != spec.name:
                sets[tuple(sorted((spec.name, g)))] = None
    return list(sets)


def grouping_columns(schema: Schema) -> list[str]:
    """Every column a view may be grouped by: the Explore page's grouping list
    (``layouts/explore/page.py`` ``group_options``): public categories of a groupable kind."""
    from services.views.queries import GROUPABLE_KINDS  # services.views imports this module

    return [c.name for c in schema.queryable_columns()
            if c.kind in GROUPABLE_KINDS and c.categories]


def precompute_views(source: DataSource, schema: Schema) -> Precomputed:
    """The compact tables of the schema's views, built at load (a DuckDB source keeps them
    per dataset version); a failure leaves the views to read the data, as before."""
    build = getattr(source, "precompute", None)
    if build is None:
        return Precomputed()
    try:
        few = [] if schema.patient_column is not None else grouping_columns(schema)
        done = build(view_column_sets(schema), few)
    except (duckdb.Error, OSError) as exc:
        log.warning("Precomputed tables not built (%s); views read the data.", exc)
        return Precomputed()
    if done.built:
        log.info("Precomputed %d column sets in %.1f s (%d already built, %d too large).",
                 done.built, done.seconds, done.kept, done.too_large)
    return done


@dataclass(frozen=True)
class WarehouseSpec:
    """One configured warehouse table (see the module docstring for the file format)."""

    id: str
    backend: str                      # "postgres" | "spark" | "duckdb" (Parquet path)
    schema_file: Path
    table: str | None = None
    url: str | None = None            # PostgreSQL SQLAlchemy URL
    schema_name: str | None = None    # PostgreSQL schema of the table
    master: str = "local[*]"          # Spark master or Spark Connect URL
    path: str | None = None           # Spark or DuckDB: a Parquet path (glob) instead
    version: str = ""
    title: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any], base: Path) -> WarehouseSpec:
        d = dict(d)
        if d.get("url_env"):
            d["url"] = os.environ.get(str(d.pop("url_env")))
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        try:
            spec = cls(**known)
        except TypeError as exc:
            raise DatasetError(f"A warehouse entry is incomplete ({exc}).") from exc
        schema_file = Path(spec.schema_file)
        return cls(**{**known, "schema_file": schema_file if schema_file.is_absolute()
                      else base / schema_file})

    @property
    def identity(self) -> str:
        """The dataset version: what the table is, never the password in its URL."""
        where = self.path or f"{self.schema_name or ''}.{self.table}"
        host = (self.url or self.master).rpartition("@")[2]
        text = f"{self.backend}|{host}|{where}|{self.version}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def open(self, precompute_dir: Path | None = None) -> DataSource:
        """Connect; a DuckDB (Parquet) entry keeps its precomputed tables in ``precompute_dir``."""
        if self.backend == "duckdb":  # a Parquet file, folder glob or data-lake path
            if not self.path:
                raise DatasetError(f"Warehouse '{self.id}' (duckdb) needs a Parquet path.")
            return DuckDBSource(self.path, precompute_dir=precompute_dir)
        if self.backend == "postgres":
            from services.data.sources.postgres import PostgresSource

            if not self.url or not self.table:
                raise DatasetError(f"Warehouse '{self.id}' needs a URL and a table name.")
            return PostgresSource(self.url, self.table, schema=self.schema_name)
        if self.backend == "spark":
            try:
                from services.data.sources.spark import SparkSource
            except ImportError as exc:
                raise DatasetError(
                    f"Warehouse '{self.id}' needs pyspark: install the 'spark' extra.") from exc
            return SparkSource(table=self.table, path=self.path, master=self.master)
        raise DatasetError(f"Warehouse '{self.id}': unknown backend '{self.backend}' "
                           "(use 'postgres', 'spark' or 'duckdb').")


def read_warehouse_file(path: Path) -> list[WarehouseSpec]:
    """The configured warehouse tables; DatasetError naming what is wrong."""
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"The warehouse file '{path}' could not be read ({exc}).") from exc
    if not isinstance(entries, list):
        raise DatasetError(f"The warehouse file '{path}' must hold a JSON list of tables.")
    return [WarehouseSpec.from_dict(e, Path(path).parent) for e in entries]
