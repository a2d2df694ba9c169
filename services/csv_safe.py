"""The one way the app writes CSV: every text cell a spreadsheet could run is neutralized.

A cell starting with ``=``, ``+``, ``-`` or ``@`` (or a tab / carriage return) is read as a
formula by spreadsheet programs (CSV injection); it gets a leading apostrophe. Plain numbers
(``-1.5``, ``2e-3``) are kept as they are: a spreadsheet reads them as numbers, never runs them.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

DANGEROUS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def cell(value: Any) -> str:
    """One cell as written: numbers as numbers, text with a formula start escaped."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value)) if math.isfinite(float(value)) else ""
    text = str(value)
    return text if is_safe(text) else "'" + text


def is_safe(text: str) -> bool:
    """True when a written cell cannot start a formula (a plain number may start with -)."""
    return not text.startswith(DANGEROUS) or bool(_NUMBER.match(text))


def rows_csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A CSV document: ``header`` then ``rows``, every cell through ``cell``."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([cell(h) for h in header])
    writer.writerows([cell(v) for v in row] for row in rows)
    return out.getvalue()


def frame_csv(frame: pd.DataFrame) -> str:
    """A data frame as CSV, without its index, every cell through ``cell``."""
    values = frame.astype(object).where(frame.notna(), None)
    return rows_csv([str(c) for c in frame.columns],
                    (list(r) for r in values.itertuples(index=False, name=None)))
