"""Per-attribute distances and their mapping to one scale (paper §3.2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_engine.anonymize import AttributeKind, Scaling, prefix_distance
from dp_engine.anonymize.distances import map_attribute, mean_abs_difference
from dp_engine.anonymize.table import build_table
from dp_engine.errors import DataTypeError, UnknownCategoryError
from dp_engine.schema import ColumnKind, ColumnSpec, Schema


def test_prefix_distance_on_table1_zip_codes():
    assert prefix_distance("13053", "13068") == pytest.approx(2 / 5)
    assert prefix_distance("13053", "14853") == pytest.approx(4 / 5)
    assert prefix_distance("13053", "13053") == 0.0
    assert prefix_distance("C61", "C61.9") == pytest.approx(2 / 5)


def test_hierarchical_attribute_matches_prefix_distance():
    zips = pd.Series(["13053", "13068", "13068", "13053", "14853"])
    a = map_attribute("zip", zips, AttributeKind.HIERARCHICAL, Scaling.NONE)
    for i in range(5):
        for j in range(5):
            got = a.distance(a.codes[i], a.codes[j])
            assert got == pytest.approx(prefix_distance(zips[i], zips[j], 5))


def test_rank_mapping_is_mid_rank_ecdf():
    a = map_attribute("age", pd.Series([28, 29, 21, 23, 50]), AttributeKind.NUMERIC)
    u = a.coord[a.codes]
    np.testing.assert_allclose(u, [0.5, 0.7, 0.1, 0.3, 0.9])
    assert a.distance(a.codes[2], a.codes[4]) == pytest.approx(0.8)


def test_zscore_and_none_scalings():
    x = pd.Series([1.0, 2.0, 3.0, 6.0])
    z = map_attribute("x", x, AttributeKind.NUMERIC, Scaling.ZSCORE)
    np.testing.assert_allclose(z.coord[z.codes], (x - x.mean()) / x.std(ddof=0))
    raw = map_attribute("x", x, AttributeKind.NUMERIC, Scaling.NONE)
    assert raw.distance(raw.codes[0], raw.codes[3]) == pytest.approx(5.0)


def test_mean_abs_difference_matches_brute_force():
    x = np.random.default_rng(3).normal(size=60)
    brute = np.abs(x[:, None] - x[None, :]).sum() / (60 * 59)
    assert mean_abs_difference(x) == pytest.approx(brute)


def test_nominal_weight_matches_mean_of_ordered_attributes():
    gen = np.random.default_rng(5)
    frame = pd.DataFrame(
        {
            "age": gen.integers(20, 90, 400),
            "nat": gen.choice(["A", "B", "C"], 400, p=[0.6, 0.3, 0.1]),
            "icd": gen.choice(["C61", "C61.9", "C62", "D10"], 400),
        }
    )
    t = build_table(frame, ["age", "nat", "icd"])
    age, nat, icd = t.attrs
    target = mean_abs_difference(age.coord[age.codes])
    for a in (nat, icd):
        pairs = a.distance(a.codes[:, None], a.codes[None, :])
        mean = pairs.sum() / (400 * 399)
        assert mean == pytest.approx(target, rel=1e-9)


def test_missing_is_its_own_far_value():
    a = map_attribute("age", pd.Series([30, np.nan, 40, 50]), AttributeKind.NUMERIC)
    assert a.missing_code >= 0 and a.codes[1] == a.missing_code
    real = [c for c in a.codes if c != a.missing_code]
    span = max(a.coord[real]) - min(a.coord[real])
    assert min(a.distance(a.missing_code, c) for c in real) > span
    n = map_attribute("nat", pd.Series(["A", None, "B"]), AttributeKind.NOMINAL)
    assert n.values[n.codes[1]] is None and len(set(n.codes)) == 3


def test_kinds_from_schema_and_ordinal_order():
    frame = pd.DataFrame(
        {
            "pirads": ["low", "high", "mid", "low"],
            "d": pd.to_datetime(["2020-01-01", "2021-01-01", "2020-06-01", "2020-01-01"]),
            "b": [True, False, True, True],
        }
    )
    schema = Schema(
        "s",
        (
            ColumnSpec("pirads", ColumnKind.ORDINAL, categories=("low", "mid", "high")),
            ColumnSpec("d", ColumnKind.DATE),
            ColumnSpec("b", ColumnKind.BOOLEAN),
        ),
    )
    t = build_table(frame, ["pirads", "d", "b"], schema=schema)
    p = t.attrs[0]
    assert [a.kind for a in t.attrs] == [
        AttributeKind.ORDINAL,
        AttributeKind.DATE,
        AttributeKind.BOOLEAN,
    ]
    assert list(p.values) == ["low", "mid", "high"]
    assert p.distance(p.codes[0], p.codes[1]) > p.distance(p.codes[0], p.codes[2])


def test_bad_values_raise_dp_errors():
    with pytest.raises(UnknownCategoryError):
        map_attribute(
            "p", pd.Series(["low", "odd"]), AttributeKind.ORDINAL, categories=("low", "high")
        )
    with pytest.raises(DataTypeError):
        map_attribute("x", pd.Series(["a", "b"]), AttributeKind.NUMERIC)
    schema = Schema("s", (ColumnSpec("id", ColumnKind.IDENTIFIER),))
    with pytest.raises(DataTypeError):
        build_table(pd.DataFrame({"id": ["a", "b"]}), ["id"], schema=schema)
