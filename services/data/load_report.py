"""What happened while loading a file: owner-only information (it is computed from raw data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.data.review import DataReview


@dataclass(frozen=True)
class LoadReport:
    """Row count and per-column repairs made while loading; never shown to non-owners."""

    rows: int
    columns: int
    delimiter: str = ","
    encoding: str = "utf-8"
    missing: dict[str, int] = field(default_factory=dict)   # missing cells after loading
    dropped: dict[str, int] = field(default_factory=dict)   # unreadable cells set to missing
    clamped: dict[str, int] = field(default_factory=dict)   # values moved onto a bound
    open_ended: dict[str, int] = field(default_factory=dict)  # ">3" read at its limit
    warnings: tuple[str, ...] = ()
    coded: dict[str, int] = field(default_factory=dict)     # missing-value codes read as missing
    other: dict[str, int] = field(default_factory=dict)     # cells read as the catch-all level
    present: dict[str, int] = field(default_factory=dict)   # values held per column (read back
    #                                                         from the store when it is a file)
    review: DataReview | None = None  # per-column facts for the owner's confirmation

    def lines(self) -> list[str]:
        """Human-readable summary, one line per fact."""
        delim = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(
            self.delimiter, repr(self.delimiter)
        )
        out = [f"{self.rows} rows, {self.columns} columns ({delim}-separated, {self.encoding})."]
        for counts, what in (
                (self.dropped, "unreadable value(s) treated as missing."),
                (self.clamped, "value(s) outside the bounds moved onto the nearest bound."),
                (self.open_ended, "open-ended value(s) such as '>3' read at their limit."),
                (self.coded, "missing-value code(s) read as missing."),
                (self.other, "value(s) outside the category list read as the catch-all.")):
            out.extend(f"{col}: {n} {what}" for col, n in counts.items())
        out.extend(self.warnings)
        return out
