"""The aggregate contract (dp_engine.sound.aggregates) against independent computations.

Every data source must return these integers exactly; here the numpy reference is checked
against plain pandas / numpy written from the module's definitions, with missing values,
values beyond the bounds, values on bin edges and labels outside the public lists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_engine.errors import UnknownCategoryError
from dp_engine.sound.aggregates import (
    candidate_counts,
    cell_counts,
    lattice_plan,
    moment_sums,
)

KEYS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    n = 5000
    x = rng.normal(60, 25, n).round(1)
    x[rng.random(n) < 0.05] = np.nan
    x[:5] = [0.0, 10.0, 20.0, 130.0, -4.0]          # on edges and outside the bounds
    g = rng.choice(["a", "b", "c", None], n, p=[0.5, 0.3, 0.15, 0.05])
    return x, g


def _kept(x, g):
    keep = ~np.isnan(x) & pd.Series(g).isin(KEYS).to_numpy()
    return x[keep], np.asarray([KEYS.index(v) for v in g[keep]])


def test_cell_counts_numeric_edges(data):
    x, g = data
    edges = np.arange(0.0, 130.0, 10.0)   # 0..120: 12 bins
    got = cell_counts(x, edges, groups=g, group_keys=KEYS).counts
    xs, codes = _kept(x, g)
    cells = np.clip(np.searchsorted(edges, xs, side="right") - 1, 0, len(edges) - 2)
    want = np.zeros((3, len(edges) - 1), dtype=np.int64)
    np.add.at(want, (codes, cells), 1)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_cell_counts_categories_skip_missing_and_refuse_unmapped_labels():
    values = np.array(["x", "y", "x", None, "y", "y"], dtype=object)
    np.testing.assert_array_equal(cell_counts(values, ["x", "y"]).counts, [[2, 3]])
    with pytest.raises(UnknownCategoryError):
        cell_counts(np.array(["x", "other"], dtype=object), ["x", "y"])


@pytest.mark.parametrize("squares", [False, True])
def test_moment_sums_follow_the_lattice_definition(data, squares):
    x, g = data
    lower, upper = 18.0, 100.0
    got = moment_sums(x, lower, upper, squares=squares, groups=g, group_keys=KEYS)
    xs, codes = _kept(x, g)
    grid, _ = lattice_plan(lower, upper, squares)
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    c = np.clip(xs, lower, upper) - mid
    s1 = np.bincount(codes, np.rint(c * (1 / grid["sum"])), minlength=3)
    np.testing.assert_array_equal(got.count, np.bincount(codes, minlength=3))
    np.testing.assert_array_equal(got.s1, s1)
    if squares:
        s2 = np.bincount(codes, np.rint((c * c - half * half / 2) * (1 / grid["sumsq"])),
                         minlength=3)
        np.testing.assert_array_equal(got.s2, s2)
    else:
        assert got.s2 is None


def test_candidate_counts_follow_the_grid_definition(data):
    x, g = data
    lower, upper, c = 18.0, 100.0, 101
    got = candidate_counts(x, lower, upper, c, groups=g, group_keys=KEYS)
    xs, codes = _kept(x, g)
    cells = np.clip(np.floor((np.clip(xs, lower, upper) - lower) * ((c - 1) / (upper - lower))),
                    0, c - 1).astype(int) + 1
    want = np.zeros((3, c + 1), dtype=np.int64)
    np.add.at(want, (codes, cells), 1)
    np.testing.assert_array_equal(got.counts, want)
    assert got.counts[:, 0].sum() == 0
