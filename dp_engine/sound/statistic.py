"""The five statistics sound mode releases, as one enum instead of strings compared everywhere.

A ``Statistic`` is a ``str`` (``Statistic.MEAN == "mean"``), so the public names stay what
URLs, the UI, stored plans and ledger rows carry; code inside the engine dispatches on the
members and on what each kind of release is made of (``counts``, ``moments``).
"""

from __future__ import annotations

from enum import StrEnum

from dp_engine.errors import UnknownQueryError


class Statistic(StrEnum):
    """A statistic of sound mode (its value is its public name)."""

    COUNT = "count"
    HISTOGRAM = "histogram"
    MEAN = "mean"
    VARIANCE = "variance"
    QUANTILES = "quantiles"

    @classmethod
    def of(cls, value: object) -> Statistic:
        """The member named ``value``; UnknownQueryError (listing the names) otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise UnknownQueryError(f"Unknown statistic {value!r}: choose one of "
                                    f"{', '.join(cls)}.") from None

    @property
    def counts(self) -> bool:
        """Released as noisy counts per cell (a count is a histogram of one cell)."""
        return self in (Statistic.COUNT, Statistic.HISTOGRAM)

    @property
    def moments(self) -> bool:
        """Released from noisy lattice sums (count, sum and, for a variance, squares)."""
        return self in (Statistic.MEAN, Statistic.VARIANCE)

    @property
    def components(self) -> tuple[str, ...]:
        """The noisy sums a moment is drawn from (ε split evenly between them)."""
        return ("count", "sum", "sumsq") if self is Statistic.VARIANCE else ("count", "sum")
