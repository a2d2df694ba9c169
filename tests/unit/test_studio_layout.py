"""The Release page's column table writes public bounds as people write them."""

from __future__ import annotations

from dp_engine.schema import ColumnSpec
from layouts.studio.page import _public


def test_year_bounds_read_as_years_not_exponents():
    year = ColumnSpec("Year", "numeric", lower=2017, upper=2023, bin_width=1)
    assert _public(year) == "2017 to 2023"
    dose = ColumnSpec("Dose", "numeric", lower=0.25, upper=1234567.5, bin_width=5000)
    assert _public(dose) == "0.25 to 1234567.5"
    assert "e+" not in _public(ColumnSpec("Big", "numeric", lower=0, upper=2.5e7, bin_width=1e5))
