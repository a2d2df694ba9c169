"""Large CSV files to Parquet, streamed: hashed while read, normalized chunk by chunk.

A large file never sits in memory whole: pandas parses it in chunks of ``CHUNK_ROWS`` rows
from a reader that feeds every byte into SHA-256 on the way (so the dataset version comes
from the same single pass), each chunk gets the schema applied exactly as a small upload
does (``apply_schema``), and DuckDB writes it as one Parquet part with fixed column types.
Without a schema, one is proposed from the first chunk (flagged, for the owner to confirm).
The parts land in a temporary folder renamed into place at the end, so another worker
either sees a complete dataset or none; ``ingest.json`` beside them keeps the load report.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import BinaryIO

import pandas as pd

from dp_engine.schema import ColumnKind, Schema
from services.data.csv_loader import HEAD_BYTES, dataset_slug, read_table
from services.data.errors import DatasetError
from services.data.integrity import check_counts
from services.data.load_report import LoadReport
from services.data.normalization import apply_schema
from services.data.schema_inference import propose_schema
from services.data.value_parsing import EXTRA_NA
from services.lazy import lazy

duckdb = lazy("duckdb")  # loaded on first use: not at app start

CHUNK_ROWS = 1_000_000
SOURCE_FILE = "source.json"      # which file (path, version) an ingestion folder holds
SCHEMA_FILE = "schema.json"      # the schema its values were typed with
HASH_BLOCK = 8 << 20
_TEXT_HINT_KINDS = frozenset(
    {ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.DATE, ColumnKind.ORDINAL}
)


class HashingReader(io.RawIOBase):
    """A binary file wrapper that hashes every byte read through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha.update(data)
        self.bytes += n
        return n

    def finish(self) -> str:
        """Read any bytes the parser left, then the version (first 16 hex of SHA-256)."""
        while chunk := self.raw.read(HASH_BLOCK):
            self.sha.update(chunk)
        return self.sha.hexdigest()[:16]


@dataclass(frozen=True)
class Ingested:
    """A dataset stored as Parquet parts: where, which version, its schema and load report."""

    parquet: Path        # folder of part files
    version: str
    schema: Schema
    report: LoadReport

    @property
    def glob(self) -> str:
        return str(self.parquet / "*.parquet")


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        head = fh.read(HEAD_BYTES * 4)
    cut = head.rfind(b"\n")
    return head[: cut + 1] if cut > 0 else head


def _chunks(path: Path, reader: HashingReader, delimiter: str, encoding: str,
            schema: Schema | None) -> Iterator[pd.DataFrame]:
    hints = {}
    if schema is not None:
        hints = {c.name: "category" for c in schema.columns if c.kind in _TEXT_HINT_KINDS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for chunk in pd.read_csv(io.BufferedReader(reader, HASH_BLOCK), sep=delimiter,
                                     encoding=encoding, na_values=EXTRA_NA, index_col=False,
                                     encoding_errors="replace", low_memory=False,
                                     dtype=hints or None, chunksize=CHUNK_ROWS):
                chunk.columns = [str(c).strip() for c in chunk.columns]
                yield chunk
        except (pd.errors.ParserError, ValueError, UnicodeError) as exc:
            raise DatasetError(
                f"'{path.name}' could not be read as a table ({exc}). Check that every row has "
                "as many values as the header and that quotes are closed."
            ) from exc


def _merge(total: dict[str, int], part: dict[str, int]) -> None:
    for key, n in part.items():
        total[key] = total.get(key, 0) + int(n)


def ingest_csv(path: Path, dest: Path, *, schema: Schema | None = None,
               dataset_id: str | None = None) -> Ingested:
    """Stream ``path`` into Parquet parts under ``dest``/<version>.<schema hash>/.

    Returns the stored dataset if that folder already exists (another worker made it).
    """
    path, dest = Path(path), Path(dest)
    head = read_table(_head(path), filename=path.name, max_bytes=1 << 62, schema=schema)
    tmp = dest / f".ingest-{os.getpid()}-{id(head)}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tally: dict[str, dict[str, int]] = {}  # every per-column count of the load report
    rows, notes, types = 0, list(head.warnings), None
    try:
        con = duckdb.connect(config={"memory_limit": "1GB", "threads": 2})
        try:
            with path.open("rb") as raw:
                reader = HashingReader(raw)
                for i, chunk in enumerate(_chunks(path, reader, head.delimiter, head.encoding,
                                                  schema)):
                    if schema is None:
                        schema = propose_schema(chunk, dataset_id or dataset_slug(path.name))
                    frame, schema, report = apply_schema(chunk, schema, filename=path.name)
                    types = _write_part(con, frame, tmp / f"part-{i:05d}.parquet", types)
                    rows += report.rows
                    for key, counts in vars(report).items():
                        if isinstance(counts, dict):
                            _merge(tally.setdefault(key, {}), counts)
                    notes.extend(w for w in report.warnings if w not in notes)
                version = reader.finish()
        finally:
            con.close()
        if schema is None or rows == 0:
            raise DatasetError(f"'{path.name}' has a header row but no data rows.")
        # the report counts what the store holds, and only if it is what was parsed
        stored_rows, held = stored_counts(tmp, schema.names)
        check_counts(tally.get("present", {}), held, rows, stored_rows, path.name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tally["present"] = held
    tally["missing"] = {n: stored_rows - k for n, k in held.items() if stored_rows - k}
    report = LoadReport(rows=stored_rows, columns=len(schema.columns),
                        delimiter=head.delimiter, encoding=head.encoding,
                        warnings=tuple(notes), **tally)
    final = dest / f"{version}.{schema_hash(schema)}"
    _write_meta(tmp, report)
    (tmp / SCHEMA_FILE).write_text(json.dumps(schema.to_dict()), encoding="utf-8")
    (tmp / SOURCE_FILE).write_text(json.dumps({"path": str(path.resolve()),
                                               "version": version}), encoding="utf-8")
    try:
        tmp.rename(final)
    except OSError:  # another worker finished first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return Ingested(final, version, schema, read_meta(final))


def previous(dest: Path, path: Path, schema: Schema | None) -> Ingested | None:
    """The newest complete ingestion of the file at ``path`` (any earlier version of it) under
    ``schema`` (any schema when None), or None: what stays in place when a new version is
    refused."""
    want = str(Path(path).resolve())
    found: list[tuple[float, Path, str]] = []
    for meta in Path(dest).glob(f"*/{SOURCE_FILE}"):
        try:
            info = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        folder = meta.parent
        if info.get("path") != want or not (folder / "ingest.json").exists():
            continue
        if schema is not None and not folder.name.endswith(f".{schema_hash(schema)}"):
            continue
        found.append((folder.stat().st_mtime, folder, str(info.get("version", ""))))
    if not found:
        return None
    _, folder, version = max(found)
    kept = schema if schema is not None else _parquet_schema(folder)
    return None if kept is None else Ingested(folder, version, kept, read_meta(folder))


def _parquet_schema(folder: Path) -> Schema | None:
    try:
        return Schema.from_dict(json.loads((folder / SCHEMA_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stored_counts(folder: Path, names: list[str] | tuple[str, ...],
                  pattern: str = "*.parquet") -> tuple[int, dict[str, int]]:
    """(rows, values present per column) of the Parquet parts in ``folder``, read back."""
    con = duckdb.connect(config={"threads": 2})
    try:
        rel = con.read_parquet(str(Path(folder) / pattern))
        cols = [f'count("{n.replace(chr(34), chr(34) * 2)}")' for n in names]
        got = rel.aggregate(", ".join(["count(*)", *cols])).fetchall()[0]
    finally:
        con.close()
    assert got is not None
    return int(got[0]), {n: int(v) for n, v in zip(names, got[1:], strict=True)}


def stored(dest: Path, version: str, schema: Schema) -> Ingested | None:
    """A complete earlier ingestion of this version under this schema, if any."""
    final = Path(dest) / f"{version}.{schema_hash(schema)}"
    if not (final / "ingest.json").exists():
        return None
    return Ingested(final, version, schema, read_meta(final))


def schema_hash(schema: Schema) -> str:
    """What the Parquet content depends on: column names, kinds, bounds and categories."""
    cols = [{k: v for k, v in c.to_dict().items()
             if k not in ("label", "unit", "description", "derived_from_data", "role")}
            for c in schema.columns]
    text = json.dumps(cols, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _write_part(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, out: Path,
                types: dict[str, str] | None) -> dict[str, str]:
    """One Parquet part; later parts are cast to the first part's column types."""
    for name in frame.columns:
        if pd.api.types.is_datetime64_any_dtype(frame[name].dtype):
            frame[name] = frame[name].astype("datetime64[us]")  # Spark reads no nanoseconds
    rel = con.from_df(frame)
    if types is None:
        types = {str(n): str(t) for n, t in zip(rel.columns, rel.types, strict=True)}
        types = {n: ("VARCHAR" if t == '"NULL"' else t) for n, t in types.items()}
    exprs = [duckdb.ColumnExpression(n).cast(duckdb.sqltype(t)).alias(n)
             for n, t in types.items()]
    rel.select(*exprs).write_parquet(str(out))
    return types


def _write_meta(folder: Path, report: LoadReport) -> None:
    plain = {k: v for k, v in vars(report).items()
             if isinstance(v, str | int | float | dict | tuple | list)}
    (folder / "ingest.json").write_text(json.dumps(plain, indent=2), encoding="utf-8")


def read_meta(folder: Path) -> LoadReport:
    data = json.loads((Path(folder) / "ingest.json").read_text(encoding="utf-8"))
    data["warnings"] = tuple(data.get("warnings", ()))
    known = {f.name for f in fields(LoadReport)}
    return LoadReport(**{k: v for k, v in data.items() if k in known})

