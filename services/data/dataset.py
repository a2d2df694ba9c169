"""One loaded dataset (``Dataset``) and the registry's record of it (``Entry``), shared by the
registry of small files (``services.data.registry``) and of large ones
(``services.data.sources.registry_large``)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dp_engine.schema import Schema
from services.data.load_report import LoadReport
from services.data.sources.base import DataSource
from services.data.sources.sample import LazySample


def content_version(content: bytes) -> str:
    """First 16 hex digits of the SHA-256 of the raw bytes."""
    return hashlib.sha256(content).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Dataset:
    """One loaded dataset: its rows (or a lazy sample), public schema and owner-only report.

    ``table`` is the normalized frame of a small dataset, or for a large file or warehouse
    table a ``LazySample`` read only when a row-based page asks for ``frame``. Compared by
    identity (``eq=False``): a DataFrame has no single truth value.
    """

    id: str
    title: str
    version: str
    table: pd.DataFrame | LazySample | None = field(repr=False)
    schema: Schema
    load_report: LoadReport
    source: str = "upload"  # "sample", "config" or "upload"
    filename: str = ""
    data: DataSource | None = field(default=None, repr=False)  # large / warehouse: aggregates

    @property
    def frame(self) -> pd.DataFrame:
        """The rows row-based pages use; a large dataset's capped sample is read here once."""
        table = self.table
        return table.get().frame if isinstance(table, LazySample) else table

    @property
    def row_count(self) -> int:
        """Rows in the dataset (every row of a large one), without reading any."""
        table = self.table
        return self.load_report.rows if isinstance(table, LazySample) else len(table)


@dataclass
class Entry:
    """A registered dataset and where its bytes live."""

    dataset: Dataset
    raw_path: Path          # where the bytes live (re-read when the schema changes)
    schema_mtime: float | None = None


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` atomically (temp file + rename: another worker never reads half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
