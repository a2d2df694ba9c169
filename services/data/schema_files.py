"""Read and write schema files (JSON): the public metadata stored next to a dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dp_engine.errors import SchemaError
from dp_engine.schema import Schema
from services.data.dataset import write_json


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
    """Write atomically (``write_json``) so a reader never sees half a schema."""
    write_json(Path(path), schema.to_dict())
