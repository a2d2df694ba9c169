"""Histogram bins and category lists are capped in the schema, before any per-bin work."""

from __future__ import annotations

import numpy as np
import pytest

import dp_engine.schema as schema_mod
from dp_engine.errors import SchemaError
from dp_engine.schema import MAX_BINS, MAX_CATEGORIES, ColumnSpec, Schema


@pytest.fixture
def arange_calls(monkeypatch):
    """Counts np.arange calls: bin_edges builds its edges with it, one per bin."""
    calls = []
    real = np.arange

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(schema_mod.np, "arange", counting)
    return calls


def test_a_bin_width_making_1e5_bins_is_refused_before_any_bin_exists(arange_calls):
    with pytest.raises(SchemaError) as err:
        ColumnSpec("age", "numeric", label="Age", lower=0, upper=110, bin_width=0.0011)
    text = str(err.value)
    assert "100,000 histogram bins" in text and f"at most {MAX_BINS:,}" in text
    assert "at least 0.11" in text  # what to choose instead
    assert arange_calls == []


def test_a_schema_file_with_too_many_bins_is_refused(arange_calls):
    column = {"name": "psa", "kind": "numeric", "lower": 0, "upper": 100, "bin_width": 1e-6}
    with pytest.raises(SchemaError, match="histogram bins"):
        Schema.from_dict({"columns": [column]})
    assert arange_calls == []


def test_bin_edges_refuses_too_many_bins_even_past_the_constructor(arange_calls):
    spec = ColumnSpec("age", "numeric", lower=0, upper=110, bin_width=1)
    object.__setattr__(spec, "bin_width", 1e-3)  # as if built without validation
    with pytest.raises(SchemaError, match="at most"):
        spec.bin_edges()
    assert arange_calls == []


def test_the_largest_allowed_histogram_still_works(arange_calls):
    spec = ColumnSpec("age", "numeric", lower=0, upper=MAX_BINS, bin_width=1)
    assert len(spec.bin_edges()) == MAX_BINS + 1 and len(arange_calls) == 1


def test_too_many_categories_are_refused_with_what_to_do():
    ColumnSpec("site", "categorical", categories=[f"s{i}" for i in range(MAX_CATEGORIES)])
    with pytest.raises(SchemaError, match=f"lists {MAX_CATEGORIES + 1} categories"):
        ColumnSpec("site", "categorical",
                   categories=[f"s{i}" for i in range(MAX_CATEGORIES + 1)])
    with pytest.raises(SchemaError, match="100,000 categories"):
        ColumnSpec("site", "categorical", categories=(str(i) for i in range(100_000)))


def test_ordinal_levels_use_their_categories_not_bins():
    # a few far-apart levels with bin width 1: histograms count the levels, not 10^6 bins
    spec = ColumnSpec("dose", "ordinal", lower=0, upper=1_000_000, bin_width=1,
                      categories=(0, 1_000_000))
    assert spec.category_list() == (0, 1_000_000)


def test_bounds_too_far_apart_for_floats_are_refused_when_binned(arange_calls):
    spec = ColumnSpec("x", "numeric", lower=-1e308, upper=1e308, bin_width=1e306)
    with pytest.raises(SchemaError, match="too far apart"):
        spec.bin_edges()
    assert arange_calls == []
