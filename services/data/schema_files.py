"""Read and write schema files (JSON): the public metadata stored next to a dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dp_engine.errors import SchemaError
from dp_engine.schema import Schema


def read_schema_file(path: str | os.PathLike[str]) -> Schema:
    """The schema in a JSON file; SchemaError naming the file when it is unreadable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SchemaError(f"Schema file '{path.name}' was not found.") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaError(f"Schema file '{path.name}' is not valid JSON: {exc}") from exc
    return Schema.from_dict(data)


def write_schema_file(path: str | os.PathLike[str], schema: Schema) -> None:
    """Write atomically (temp file + rename) so a reader never sees half a schema."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(schema.to_dict(), indent=2, ensure_ascii=False) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
