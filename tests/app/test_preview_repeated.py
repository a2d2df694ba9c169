"""A preview stands for n̂ patients by counting simulated rows several times: the aggregates
equal those of the repeated table exactly, and at most SIMULATED_ROWS rows are drawn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_engine.errors import DataTypeError
from dp_engine.sound.aggregates import repeated
from services.data.csv_loader import load_csv
from services.data.registry import SAMPLE_CSV, SAMPLE_SCHEMA, read_schema_file
from services.data.sources.memory import PandasSource
from services.data.sources.query import AggregateQuery as Q
from services.views.preview import SIMULATED_ROWS, RepeatedSource, simulated_source


def _same(a, b) -> None:
    assert type(a) is type(b)
    for name, value in vars(a).items():
        other = getattr(b, name)
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, other), name
        else:
            assert value == other, name


@pytest.mark.parametrize("times", [1, 3])
def test_repeated_aggregates_equal_those_of_the_repeated_table(times):
    schema = read_schema_file(SAMPLE_SCHEMA)
    frame, schema, _ = load_csv(SAMPLE_CSV.read_bytes(), filename="c.csv", schema=schema,
                                max_bytes=1 << 30)
    copies = pd.concat([frame] * times, ignore_index=True)
    queries = [q for g in (None, "PIRADS score") for q in (
        Q.histogram(schema, "Age", g), Q.histogram(schema, "Prostatitis", g),
        Q.moments(schema, "Age", g), Q.moments(schema, "Gleason score", g, squares=True),
        Q.candidates(schema, "Age", g), Q.count(schema, g, require=("Age",)))]
    many, once = PandasSource(copies), RepeatedSource(frame, times)
    for q in queries:
        _same(once.aggregate(q), many.aggregate(q))
    assert once.row_count() == len(copies)
    with pytest.raises(DataTypeError, match="1 or more"):
        repeated(once.aggregate(queries[0]), 0)


def test_a_warehouse_sized_preview_draws_at_most_the_cap():
    schema = read_schema_file(SAMPLE_SCHEMA)
    rng = np.random.default_rng(0)
    big = simulated_source(schema, ["Age", "PIRADS score"], 123_456_789, rng)
    assert len(big.frame) <= SIMULATED_ROWS
    assert abs(big.row_count() - 123_456_789) <= big.times / 2
    counts = big.aggregate(Q.histogram(schema, "Age", "PIRADS score")).counts
    assert counts.sum() == big.row_count() and np.all(counts % big.times == 0)
    small = simulated_source(schema, ["Age"], 920, np.random.default_rng(0))
    assert small.times == 1 and len(small.frame) == 920
