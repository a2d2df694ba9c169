"""Read an uploaded or configured CSV file safely: size, binary, encoding, delimiter, header.

Every refusal is a DatasetError whose message a data owner can act on. The parsing itself
is one ``pandas.read_csv`` call on the original bytes (the C parser), so loading stays close
to a bare ``read_csv``; the checks before it only look at the first few kilobytes.
"""

from __future__ import annotations

import csv
import io
import re
import warnings
from collections import Counter
from dataclasses import dataclass, replace

import pandas as pd

from dp_engine.schema import ColumnKind, Schema
from services.data.errors import DatasetError
from services.data.limits import MAX_COLUMNS, MAX_HEADER_BYTES, RARE_LEVEL_MIN
from services.data.load_report import LoadReport
from services.data.normalization import apply_schema
from services.data.schema_inference import propose_schema
from services.data.value_parsing import EXTRA_NA

DELIMITERS = (",", ";", "\t", "|")
HEAD_BYTES = 64 * 1024
RAGGED_SHOWN = 10  # line numbers listed in a ragged-rows message
_LINE_END = re.compile(rb"[\r\n]")
_HEADER_MISMATCH = "does not match length of data"

_MAGIC = (
    (b"PK\x03\x04", "an Excel workbook or a ZIP archive"),
    (b"\xd0\xcf\x11\xe0", "an old Excel (.xls) or Word file"),
    (b"%PDF", "a PDF document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"PAR1", "a Parquet file"),
    (b"SQLite format 3", "a SQLite database"),
)


@dataclass(frozen=True)
class RawTable:
    """A CSV file read as pandas saw it, before the schema is applied."""

    frame: pd.DataFrame
    delimiter: str
    encoding: str
    warnings: tuple[str, ...]


def check_size(content: bytes, filename: str, max_bytes: int) -> None:
    """Refuse a file above the upload limit."""
    if len(content) > max_bytes:
        size, limit = (f"{n / 1_000_000:.1f} MB" for n in (len(content), max_bytes))
        raise DatasetError(
            f"'{filename}' is {size}, above the upload limit of {limit}. "
            "Export fewer rows or columns, or ask the administrator to raise the limit."
        )


def _check_size_and_kind(content: bytes, filename: str, max_bytes: int) -> bytes:
    check_size(content, filename, max_bytes)
    if not content or content.isspace():
        raise DatasetError(f"'{filename}' is empty. Export the table again with its rows.")
    for magic, what in _MAGIC:
        if content.startswith(magic):
            raise DatasetError(
                f"'{filename}' is {what}, not a CSV text file. "
                "Open it in its program and save or export it as CSV (comma-separated values)."
            )
    if content.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 "Unicode text" export
        try:
            return content.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"'{filename}' is not readable UTF-16 text.") from exc
    head = content[:HEAD_BYTES]
    control = sum(head.count(bytes([b])) for b in range(32) if b not in (9, 10, 13))
    if b"\x00" in head or control > 0.01 * len(head):
        raise DatasetError(
            f"'{filename}' contains binary data, so it is not a CSV text file "
            "(was another file type renamed to .csv?). Export the table as CSV and upload that."
        )
    return content


def _encoding(content: bytes) -> tuple[str, tuple[str, ...]]:
    if content.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig", ()
    if content.isascii():
        return "utf-8", ()
    try:
        content.decode("utf-8")
        return "utf-8", ()
    except UnicodeDecodeError:
        pass
    try:
        content.decode("cp1252")
        enc = "cp1252"
    except UnicodeDecodeError:
        enc = "latin-1"
    return enc, (
        f"The file is not UTF-8; it was read as {enc} (Windows/Latin-1). "
        "Check that accented characters look right.",
    )


def _kb(n: int) -> str:
    return f"{n / 1024:,.0f} KB"


def check_header_length(content: bytes, filename: str) -> None:
    """Refuse a header row longer than MAX_HEADER_BYTES, on the raw bytes, before parsing.

    Only the first line (the second after Excel's ``sep=`` hint) is looked at, and its
    separators are counted for the message, so a million-column header costs one scan. A long
    header is reported as too long, never cut and misread.
    """
    start = 0
    end = _line_end(content, start)
    if content[:4].lower() == b"sep=" and end - start <= 6:
        start = end + (2 if content[end:end + 2] == b"\r\n" else 1)
        end = _line_end(content, start)
    size = end - start
    if size > MAX_HEADER_BYTES:
        header = content[start:end]
        columns = max(header.count(d.encode()) for d in DELIMITERS) + 1
        raise DatasetError(
            f"The header row of '{filename}' is {_kb(size)} long (about {columns:,} columns); "
            f"at most {_kb(MAX_HEADER_BYTES)} is accepted. Export only the columns you need, "
            "with short column names."
        )


def check_column_count(names: list[str], filename: str, max_columns: int) -> None:
    """Refuse more than ``max_columns`` columns (from the parsed header, before the table)."""
    if len(names) > max_columns:
        raise DatasetError(
            f"'{filename}' has {len(names):,} columns; at most {max_columns:,} are accepted. "
            "Export only the columns you need for this study."
        )


def _line_end(content: bytes, start: int) -> int:
    match = _LINE_END.search(content, start)
    return match.start() if match else len(content)


def _head_lines(content: bytes, encoding: str) -> list[str]:
    head = content[:HEAD_BYTES].decode(encoding, errors="replace")
    lines = head.splitlines()
    if len(content) > HEAD_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut in half
    return [ln for ln in lines[:50] if ln.strip()]


def sniff_delimiter(lines: list[str]) -> str:
    """The delimiter giving the same number (>1) of fields on most of the first lines."""
    best, best_score = ",", (0.0, 0)
    for delim in DELIMITERS:
        try:
            widths = [len(r) for r in csv.reader(lines, delimiter=delim)]
        except csv.Error:
            continue
        if not widths or widths[0] < 2:
            continue
        agree = sum(w == widths[0] for w in widths) / len(widths)
        score = (agree, widths[0])
        if score > best_score:
            best, best_score = delim, score
    return best


def _header(lines: list[str], delim: str, filename: str, max_columns: int) -> list[str]:
    try:
        names = next(csv.reader(lines[:1], delimiter=delim))
    except (csv.Error, StopIteration) as exc:
        raise DatasetError(f"The first line of '{filename}' is not a readable header.") from exc
    check_column_count(names, filename, max_columns)
    names = [n.strip() for n in names]
    counts = Counter(n for n in names if n)
    dupes = sorted(n for n, c in counts.items() if c > 1)
    if dupes:
        raise DatasetError(
            f"'{filename}' has duplicate column names: {', '.join(dupes)}. "
            "Give every column a unique name in the header row."
        )
    return names


def _parse(
    content: bytes, encoding: str, delim: str, filename: str, dtypes: dict[str, str], skip: int
) -> pd.DataFrame:
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = pd.read_csv(
                io.BytesIO(content), sep=delim, encoding=encoding, na_values=EXTRA_NA,
                encoding_errors="replace", dtype=dtypes or None, low_memory=False,
                index_col=False, skiprows=skip,
            )
    except pd.errors.EmptyDataError as exc:
        raise DatasetError(f"'{filename}' has no header row and no data.") from exc
    except pd.errors.ParserError as exc:
        detail = str(exc).split("Error tokenizing data. C error: ")[-1].strip()
        if "Expected " in detail and " fields in line " in detail:
            raise _ragged(content, encoding, delim, filename) from exc
        raise DatasetError(
            f"'{filename}' could not be read as a table: {detail}. "
            "Check that every row has as many values as the header and that quotes are closed."
        ) from exc
    except (ValueError, OverflowError, csv.Error) as exc:
        raise DatasetError(f"'{filename}' could not be read as a table ({exc}).") from exc
    # pandas drops the extra fields of a long first row with only this warning
    if any(_HEADER_MISMATCH in str(w.message) for w in caught):
        raise _ragged(content, encoding, delim, filename)
    return frame


def ragged_lines(text: str, delim: str) -> tuple[int, list[int], list[int]]:
    """The header's field count, and the line numbers (1-based) of rows with more fields:
    those whose extra fields hold values, and those whose extras are only empty."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delim)
    width, bad, empty, end = None, [], [], 0
    try:
        for row in reader:
            start, end = end + 1, reader.line_num
            if not row or (width is None and len(row) == 1 and row[0].lower().startswith("sep=")):
                continue
            if width is None:
                width = len(row)
            elif len(row) > width:
                (bad if any(f.strip() for f in row[width:]) else empty).append(start)
    except csv.Error:
        pass  # a broken quote: report what was found before it
    return width or 0, bad, empty


def _line_list(lines: list[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:RAGGED_SHOWN])
    more = f" and {len(lines) - RAGGED_SHOWN:,} more" if len(lines) > RAGGED_SHOWN else ""
    return f"line {shown}" if len(lines) == 1 else f"lines {shown}{more}"


def _ragged(content: bytes, encoding: str, delim: str, filename: str) -> DatasetError:
    width, bad, empty = ragged_lines(content.decode(encoding, errors="replace"), delim)
    if bad:
        return DatasetError(
            f"'{filename}' has rows with more values than its header ({width} columns): "
            f"{_line_list(bad)}. Their extra values would be lost, so nothing was loaded. Remove "
            "the extra values or add the missing column names, and put quotes around cells "
            "that contain the separator."
        )
    if empty:
        return DatasetError(
            f"'{filename}' has rows ending with an extra separator ({width} columns in the "
            f"header): {_line_list(empty)}. Remove the trailing separators, or end every row "
            "with one."
        )
    return DatasetError(
        f"'{filename}' could not be read as a table: some rows have more values than the "
        "header. Check that quotes are closed."
    )


def _fix_columns(frame: pd.DataFrame, names: list[str], filename: str) -> tuple[pd.DataFrame, list]:
    notes = []
    if len(names) != frame.shape[1]:
        names = [str(c).strip() for c in frame.columns]
    blank = [i for i, n in enumerate(names) if not n or n.startswith("Unnamed: ")]
    empty_blank = [i for i in blank if frame.iloc[:, i].isna().all()]
    named_blank = [i for i in blank if i not in empty_blank]
    if named_blank:
        cols = ", ".join(str(i + 1) for i in named_blank)
        raise DatasetError(
            f"Column(s) {cols} of '{filename}' have values but no name. "
            "Give every column a name in the header row."
        )
    if empty_blank:
        notes.append(f"Dropped {len(empty_blank)} empty column(s) without a name.")
    keep = [i for i in range(frame.shape[1]) if i not in empty_blank]
    frame = frame.iloc[:, keep]
    frame.columns = [names[i] for i in keep]
    if frame.shape[1] == 0:
        raise DatasetError(f"'{filename}' has no named columns.")
    return frame, notes


_CATEGORY_KINDS = frozenset(
    {ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN, ColumnKind.DATE, ColumnKind.ORDINAL}
)


def _dtype_hints(schema: Schema | None, lines: list[str], delim: str) -> dict[str, str]:
    """Columns to read as categoricals, keyed by the header as written in the file.

    With a schema: its categorical, boolean, date and ordinal columns. Without one: the
    columns that hold text in the first lines (a probe of at most 50 lines).
    """
    raw_names = next(csv.reader(lines[:1], delimiter=delim))
    if schema is not None:
        wanted = {c.name for c in schema.columns if c.kind in _CATEGORY_KINDS}
        return {raw: "category" for raw in raw_names if raw and raw.strip() in wanted}
    if len(set(raw_names)) != len(raw_names):
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = pd.read_csv(io.StringIO("\n".join(lines)), sep=delim, na_values=EXTRA_NA)
    except (ValueError, csv.Error, pd.errors.ParserError):
        return {}
    if list(probe.columns) != raw_names:
        return {}
    return {
        c: "category" for c in raw_names
        if not pd.api.types.is_numeric_dtype(probe[c].dtype)
        or pd.api.types.is_bool_dtype(probe[c].dtype)
    }


def read_table(
    content: bytes, *, filename: str, max_bytes: int, schema: Schema | None = None,
    max_columns: int = MAX_COLUMNS,
) -> RawTable:
    """Bytes -> a raw DataFrame, or a DatasetError saying what is wrong with the file.

    Text columns come back as pandas categoricals: every later step works on their distinct
    values, and reading them so is cheaper than a string column followed by a factorize.
    """
    content = _check_size_and_kind(content, filename, max_bytes)
    check_header_length(content, filename)
    encoding, notes = _encoding(content)
    lines = _head_lines(content, encoding)
    if not lines:
        raise DatasetError(f"'{filename}' is empty. Export the table again with its rows.")
    skip = 0
    first = lines[0].strip()
    if first.lower().startswith("sep=") and len(first) == 5:  # Excel's separator hint line
        delim, lines, skip = first[4], lines[1:], 1
        if not lines:
            raise DatasetError(f"'{filename}' has no header row and no data.")
    else:
        delim = sniff_delimiter(lines)
    names = _header(lines, delim, filename, max_columns)
    hints = _dtype_hints(schema, lines, delim)
    frame = _parse(content, encoding, delim, filename, hints, skip)
    if frame.shape[0] == 0:
        raise DatasetError(
            f"'{filename}' has a header row but no data rows. Export the table with its rows."
        )
    frame, more = _fix_columns(frame, names, filename)
    if len(frame.columns) == 1 and len(lines[0]) > 40:
        more.append(
            "Only one column was found; if the file uses another separator, "
            "save it as comma-, semicolon- or tab-separated text."
        )
    return RawTable(frame, delim, encoding, tuple(notes) + tuple(more))


def load_csv(
    content: bytes, *, filename: str, schema: Schema | None, max_bytes: int,
    max_columns: int = MAX_COLUMNS, rare_level_min: int = RARE_LEVEL_MIN,
) -> tuple[pd.DataFrame, Schema, LoadReport]:
    """Read, type and clean a CSV file.

    With ``schema`` the file must contain its columns (extra ones are dropped); without it a
    schema is proposed (unconfirmed, data-derived parts flagged). Returns the normalized frame,
    the schema applied and an owner-only LoadReport (with its review of the data). Raises
    DatasetError on bad input.
    """
    raw = read_table(content, filename=filename, max_bytes=max_bytes, schema=schema,
                     max_columns=max_columns)
    if schema is None:
        schema = propose_schema(raw.frame, dataset_slug(filename))
    frame, schema, report = apply_schema(raw.frame, schema, filename=filename,
                                         rare_level_min=rare_level_min)
    return frame, schema, replace(report, delimiter=raw.delimiter, encoding=raw.encoding,
                                  warnings=raw.warnings + report.warnings)


def dataset_slug(filename: str) -> str:
    """A lower-case id from a file name: 'My Export (2).csv' -> 'my-export-2'."""
    stem = filename.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    slug = "".join(ch.lower() if ch.isascii() and ch.isalnum() else "-" for ch in stem)
    slug = "-".join(part for part in slug.split("-") if part)
    return slug[:40] or "dataset"
