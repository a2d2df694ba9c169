"""One canonical text label per category value, and its inverse for typed SQL columns.

Public category lists, group keys and the in-memory frame all meet as labels: booleans are
"Yes"/"No", whole floats "3" (not "3.0"), anything else ``str``. A SQL source does not turn
every cell into text (slow, and SQL's float-to-text differs between engines); it compares
the column with the typed value whose label is the public one (``typed_value``), so a row
falls in a category in SQL exactly when its label equals the category's label in pandas.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum

import numpy as np

_INTEGER = re.compile(r"-?[0-9]+")


class StorageKind(StrEnum):
    """How a backend stores a column (not what the schema says it means)."""

    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    TEXT = "text"
    OTHER = "other"     # dates, binary, ...: no category or number can match

    @property
    def numeric(self) -> bool:
        return self in (StorageKind.INT, StorageKind.FLOAT)


def canonical_label(value: object) -> str:
    """The text label of one category value, whatever its storage type."""
    if isinstance(value, bool | np.bool_):
        return "Yes" if value else "No"
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def typed_value(label: str, kind: StorageKind) -> object | None:
    """The value of a ``kind`` column whose canonical label is ``label`` (None: no such value).

    Exact inverse of ``canonical_label`` on each storage kind, so matching by value in SQL
    and matching by label in pandas keep the same rows.
    """
    label = str(label)
    if kind is StorageKind.TEXT:
        return label
    if kind is StorageKind.BOOL:
        return {"Yes": True, "No": False}.get(label)
    if kind is StorageKind.INT:
        return int(label) if _INTEGER.fullmatch(label) and str(int(label)) == label else None
    if kind is StorageKind.FLOAT:
        try:
            value = float(label)
        except ValueError:
            return None
        if math.isnan(value) or canonical_label(value) != label:
            return None
        return value
    return None


def code_value(code: str, kind: StorageKind) -> object | None:
    """The stored value a declared missing-value code stands for ("999" is 999 or 999.0).

    Looser than ``typed_value`` on numbers: a code is written by a person, so "999.0"
    matches the number 999 too.
    """
    code = str(code).strip()
    if kind is StorageKind.TEXT:
        return code
    if kind.numeric:
        try:
            value = float(code)
        except ValueError:
            return None
        if not math.isfinite(value):
            return None
        if kind is StorageKind.INT:
            return int(value) if value.is_integer() else None
        return value
    if kind is StorageKind.BOOL:
        return typed_value(code, kind)
    return None
