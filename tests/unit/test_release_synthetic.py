"""MST's pure parts: the domain comes from the public schema only, encode/decode stay in it,
the ε split and scales, the simplex projection (hand-worked), the tree selection, and the
OpenDP accountant agrees with the plan's ε."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dp_engine.errors import DPError
from dp_engine.release.synthetic import (
    FRACTIONS,
    MAX_NUMERIC_LEVELS,
    MISSING,
    decode,
    encode,
    marginal,
    measure_mst,
    plan_mst,
    select_edges,
    simplex_total,
    synth_domain,
)
from dp_engine.schema import ColumnSpec, Schema
from services.studio.accounting import opendp_epsilon

SCHEMA = Schema("t", (
    ColumnSpec("id", "identifier", role="direct_identifier"),
    ColumnSpec("age", "numeric", lower=20, upper=100, bin_width=5),
    ColumnSpec("fine", "numeric", lower=0, upper=1000, bin_width=1),
    ColumnSpec("grade", "ordinal", lower=1, upper=3, categories=(1, 2, 3)),
    ColumnSpec("dept", "categorical", categories=("A", "B", "other"), other_level="other"),
    ColumnSpec("flag", "boolean", categories=(False, True)),
    ColumnSpec("note", "free_text"),
    ColumnSpec("nobounds", "numeric"),
))


def test_domain_from_schema_only():
    dom = synth_domain(SCHEMA)
    assert dom.names == ("age", "fine", "grade", "dept", "flag")
    assert set(dom.skipped) == {"id", "note", "nobounds"}
    assert "bounds" in dom.skipped["nobounds"]
    age, fine, grade, dept, flag = dom.attributes
    assert age.edges == tuple(float(e) for e in range(20, 101, 5)) and age.size == 17
    assert fine.edges[0] == 0 and fine.edges[-1] == 1000
    assert len(fine.edges) - 1 <= MAX_NUMERIC_LEVELS
    assert grade.categories == (1, 2, 3) and grade.labels[-1] == MISSING
    assert flag.categories == (False, True) and dept.size == 4


def test_columns_subset_in_order_without_repeats():
    assert synth_domain(SCHEMA, ["flag", "age", "flag"]).names == ("flag", "age")


def test_no_column_is_a_clear_error():
    with pytest.raises(DPError, match="No column can be synthesized"):
        synth_domain(SCHEMA, ["note", "id"])


def test_encode_clamps_and_maps_unknown_values():
    frame = pd.DataFrame({"age": [10.0, 20.0, 24.9, 100.0, 150.0, None],
                          "fine": [0, 1, 999, 1000, 5, 6],
                          "grade": pd.array([1, 3, None, 2, 2, 1], dtype="Int64"),
                          "dept": ["A", "B", "zzz", None, "other", "A"],
                          "flag": pd.array([True, False, None, True, True, False],
                                           dtype="boolean")})
    dom = synth_domain(SCHEMA, ["age", "grade", "dept", "flag"])
    codes = encode(frame, SCHEMA, dom)
    assert codes[:, 0].tolist() == [0, 0, 0, 15, 15, 16]      # clamped to the bounds; NaN
    assert codes[:, 1].tolist() == [0, 2, 3, 1, 1, 0]
    assert codes[:, 2].tolist() == [0, 1, 2, 3, 2, 0]          # unknown -> catch-all level
    assert codes[:, 3].tolist() == [1, 0, 2, 1, 1, 0]


def test_decode_stays_in_the_public_domain():
    dom = synth_domain(SCHEMA)
    rng = np.random.default_rng(1)
    codes = np.column_stack([rng.integers(0, a.size, 5000) for a in dom.attributes])
    out = decode(codes, SCHEMA, dom, rng)
    age = out["age"].dropna()
    assert age.between(20, 100).all() and out["fine"].dropna().between(0, 1000).all()
    inside = codes[:, 0] < dom.attributes[0].size - 1
    lo = 20 + 5 * codes[inside, 0]
    assert ((age.to_numpy() >= lo) & (age.to_numpy() < lo + 5)).all()   # in its own bin
    assert set(out["grade"].dropna()) <= {1, 2, 3} and out["grade"].dtype == "Int64"
    assert set(out["dept"].dropna()) <= {"A", "B", "other"}
    assert out["flag"].dtype == "boolean"
    assert out["age"].isna().sum() == (codes[:, 0] == dom.attributes[0].size - 1).sum()


def test_plan_splits_epsilon_in_public_fractions():
    plan = plan_mst(2.0, 5, contribution=3)
    assert math.fsum(plan.epsilons.values()) == pytest.approx(2.0)
    assert plan.epsilons["two_way"] == pytest.approx(2.0 * FRACTIONS["two_way"])
    assert plan.one_way_scale == pytest.approx(3 * 5 / (2.0 * FRACTIONS["one_way"]))
    assert plan.select_scale == pytest.approx(2 * 3 * 4 / (2.0 * FRACTIONS["select"]))
    single = plan_mst(1.0, 1)
    assert single.n_edges == 0 and set(single.epsilons) == {"count", "one_way"}
    assert math.fsum(single.epsilons.values()) == pytest.approx(1.0)
    with pytest.raises(DPError):
        plan_mst(0.0, 3)


@pytest.mark.parametrize(("eps", "d", "k"), [(1.0, 12, 1), (4.0, 16, 1), (0.3, 2, 3),
                                             (2.5, 1, 2)])
def test_opendp_accountant_agrees_with_the_plan(eps, d, k):
    assert opendp_epsilon(plan_mst(eps, d, k)) == pytest.approx(eps, rel=1e-9)


def test_opendp_accountant_sees_a_wrong_scale():
    from dataclasses import replace

    plan = plan_mst(1.0, 4)
    halved = replace(plan, select_scale=plan.select_scale / 2)   # the factor 2 forgotten
    assert opendp_epsilon(halved) == pytest.approx(1.0 + plan.epsilons["select"])


def test_simplex_projection_hand_worked():
    # u = (3, 2, -1), total 4: θ = ((3 + 2) − 4) / 2 = 0.5 -> (2.5, 0, 1.5) reordered
    assert simplex_total(np.array([3.0, -1.0, 2.0]), 4).tolist() == [2.5, 0.0, 1.5]
    assert simplex_total(np.array([-5.0, -5.0]), 2).tolist() == [1.0, 1.0]
    assert simplex_total(np.array([1.0, 2.0]), 0).tolist() == [0.0, 0.0]


def test_marginal_counts():
    codes = np.array([[0, 1], [0, 1], [1, 0]])
    assert marginal(codes, (2, 2), (0, 1)).tolist() == [0, 2, 1, 0]
    assert marginal(codes, (2, 2), (1,)).tolist() == [1, 2]


def test_tree_picks_the_dependent_pair_and_spans():
    rng = np.random.default_rng(3)
    n = 2000
    a = rng.integers(0, 3, n)
    codes = np.column_stack([a, a, rng.integers(0, 3, n), rng.integers(0, 3, n)])
    sizes = (3, 3, 3, 3)
    plan = plan_mst(50.0, 4)
    one_way = [marginal(codes, sizes, (j,)) for j in range(4)]
    edges = select_edges(codes, sizes, one_way, n, plan, rng)
    assert edges[0] == (0, 1) and len(edges) == 3
    nodes = {0}
    for _ in range(3):                       # connected and acyclic: a spanning tree
        nodes |= {v for e in edges if nodes & set(e) for v in e}
    assert nodes == {0, 1, 2, 3} and len(set(edges)) == 3


def test_measurements_near_the_truth_at_large_epsilon():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"grade": pd.array(rng.integers(1, 4, 500), dtype="Int64"),
                          "flag": pd.array(rng.random(500) < 0.3, dtype="boolean")})
    dom = synth_domain(SCHEMA, ["grade", "flag"])
    codes = encode(frame, SCHEMA, dom)
    m = measure_mst(codes, dom, plan_mst(1000.0, 2), rng)
    assert abs(m.rows - 500) <= 2 and m.edges == [(0, 1)]
    assert np.abs(m.two_way[0] - marginal(codes, dom.sizes, (0, 1))).max() < 1.0
    assert np.abs(m.one_way[1] - marginal(codes, dom.sizes, (1,))).max() < 1.0
