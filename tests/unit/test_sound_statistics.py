"""Sound-mode statistics: properties (hypothesis), noise laws, interval coverage, bad input.

Distribution and coverage tests use fixed seeds; each rejects at about 1e-4 (stated
per test), so the file's false-failure probability on correct code is below 0.2 %.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from dp_engine.errors import (
    DataTypeError,
    InvalidBoundsError,
    InvalidEpsilonError,
    UnknownCategoryError,
    UnknownQueryError,
)
from dp_engine.sound import (
    Release,
    count,
    grouped_histogram,
    grouped_mean,
    grouped_quantiles,
    grouped_variance,
    histogram,
    mean,
    quantiles,
    variance,
)
from dp_engine.sound.accuracy import dlap_abs_mean
from dp_engine.sound.aggregates import _edge_index
from tests.unit.test_sound_mechanisms import chi2_pvalue, dlap_pmf

ALPHA = 1e-4
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

data = hnp.arrays(
    np.float64,
    st.integers(1, 60),
    elements=st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)),
)
bounds = st.tuples(st.floats(-1e4, 1e4), st.floats(1e-3, 1e4)).map(lambda t: (t[0], t[0] + t[1]))
epsilons = st.floats(1e-3, 10.0)
seeds = st.integers(0, 2**32 - 1)


def has_values(x: np.ndarray) -> bool:
    return bool((~np.isnan(x)).any())


def roundtrip(rel: Release) -> Release:
    back = Release.from_dict(json.loads(json.dumps(rel.to_dict())))
    assert json.dumps(back.to_dict()) == json.dumps(rel.to_dict())
    return back


# ---------------------------------------------------------------- properties


@SETTINGS
@given(data, bounds, epsilons, seeds)
def test_mean_and_variance_stay_in_their_ranges(x, b, eps, seed):
    assume(has_values(x))
    lo, hi = b
    m = mean(x, lo, hi, eps, rng=np.random.default_rng(seed))
    assert isinstance(m.value, float) and lo <= m.value <= hi
    assert lo <= m.ci_low <= m.value <= m.ci_high <= hi
    assert 0 <= m.expected_error <= hi - lo and m.epsilon == eps
    v = variance(x, lo, hi, eps, rng=np.random.default_rng(seed))
    top = ((hi - lo) / 2) ** 2
    assert 0 <= v.value <= top * (1 + 1e-12)
    assert 0 <= v.ci_low <= v.value <= v.ci_high <= top * (1 + 1e-12)
    roundtrip(m)
    roundtrip(v)


@SETTINGS
@given(data, epsilons, seeds)
def test_counts_and_histograms_are_non_negative_integers(x, eps, seed):
    assume(has_values(x))
    gen = np.random.default_rng(seed)
    c = count(x, eps, rng=gen)
    assert isinstance(c.value, int) and c.value >= 0
    assert c.ci_low <= c.value <= c.ci_high and c.ci_low >= 0
    edges = np.array([-1e6, -10.0, 0.0, 10.0, 1e6])
    h = histogram(x, edges, eps, rng=gen)
    assert h.value.dtype == np.int64 and h.value.shape == (4,) and (h.value >= 0).all()
    assert (h.ci_low <= h.value).all() and (h.value <= h.ci_high).all()
    assert roundtrip(h).value.tolist() == h.value.tolist()


@SETTINGS
@given(data, bounds, epsilons, seeds, st.lists(st.floats(0.01, 0.99), min_size=1, max_size=5))
def test_quantiles_are_sorted_and_within_bounds(x, b, eps, seed, qs):
    assume(has_values(x))
    lo, hi = b
    r = quantiles(x, lo, hi, eps, qs=qs, n_candidates=101, rng=np.random.default_rng(seed))
    assert r.value.shape == (len(qs),)
    assert (np.diff(r.value) >= 0).all()
    assert (r.value >= lo).all() and (r.value <= hi).all()
    assert (r.ci_low <= r.value).all() and (r.value <= r.ci_high).all()
    roundtrip(r)


@SETTINGS
@given(
    st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=60),
    st.lists(st.sampled_from(["x", "y"]), min_size=60, max_size=60),
    seeds,
)
def test_grouped_shapes(cats, groups, seed):
    assume(any(c is not None for c in cats))
    groups = groups[: len(cats)]
    gen = np.random.default_rng(seed)
    keys = ["x", "y", "z"]  # "z" has no record: it still gets noisy cells
    h = grouped_histogram(cats, groups, ["a", "b", "c"], keys, 1.0, rng=gen)
    assert h.value.shape == (3, 3) and (h.value >= 0).all() and h.epsilon == 1.0
    nums = np.arange(len(cats), dtype=float)
    for fn in (grouped_mean, grouped_variance):
        r = fn(nums, groups, keys, 0.0, 100.0, 1.0, rng=gen)
        assert r.value.shape == (3,) and r.expected_error.shape == (3,)
    q = grouped_quantiles(nums, groups, keys, 0.0, 100.0, 1.0, rng=gen)
    assert q.value.shape == (3, 3) and (np.diff(q.value, axis=1) >= 0).all()


def test_missing_values_are_dropped_before_noise():
    """Same seed: the answer with NaNs mixed in is identical to the answer without them."""
    x = np.array([1.0, 2.0, 7.0, 9.0])
    with_nan = np.array([1.0, np.nan, 2.0, 7.0, np.nan, 9.0])
    for fn in (
        lambda v, g: mean(v, 0, 10, 1.0, rng=g),
        lambda v, g: variance(v, 0, 10, 1.0, rng=g),
        lambda v, g: quantiles(v, 0, 10, 1.0, rng=g),
        lambda v, g: count(v, 1.0, rng=g),
        lambda v, g: histogram(v, np.array([0.0, 5, 10]), 1.0, rng=g),
    ):
        a = fn(x, np.random.default_rng(1))
        b = fn(with_nan, np.random.default_rng(1))
        assert np.array_equal(a.value, b.value)
        assert "dropped" not in json.dumps(b.to_dict())  # the number dropped is never published


def test_an_empty_selection_is_answered_not_refused():
    """Refusing would tell "no patient matches" from "one matches": the noise alone is released."""
    keys = ["x"]
    calls = (
        lambda v, g: count(v, 1.0, rng=g),
        lambda v, g: histogram(v, np.array([0.0, 1.0, 2.0]), 1.0, rng=g),
        lambda v, g: mean(v, 0, 1, 1.0, rng=g),
        lambda v, g: variance(v, 0, 1, 1.0, rng=g),
        lambda v, g: quantiles(v, 0, 1, 1.0, rng=g),
        lambda v, g: grouped_mean(v, [None] * len(v), keys, 0, 1, 1.0, rng=g),
        lambda v, g: grouped_histogram(v, [None] * len(v), ["a"], keys, 1.0, rng=g),
    )
    for call in calls:
        empty = call(np.array([]), np.random.default_rng(12))
        missing = call(np.array([np.nan, np.nan]), np.random.default_rng(12))
        assert np.array_equal(empty.value, missing.value)  # all-missing = empty, same noise
        assert np.all(np.asarray(empty.value) >= 0)
    assert count([], 1.0, rng=np.random.default_rng(13)).ci_low == 0


def test_inputs_of_many_types_are_accepted():
    gen = np.random.default_rng(2)
    for values in (
        [1, 2, 3, None],
        pd.Series([1, 2, None], dtype="Int64"),
        pd.Series([1.5, 2.5]),
        np.array([True, False, True]),
        np.array([1, 2, 3], dtype=np.int16),
    ):
        assert 0 <= mean(values, 0, 5, 1.0, rng=gen).value <= 5
    assert histogram(pd.Series(["a", None, "b"]), ["a", "b"], 1.0, rng=gen).value.shape == (2,)


def test_values_are_clamped_to_the_public_bounds():
    x = np.full(1000, 1e9)
    assert mean(x, 0, 10, 50.0, rng=np.random.default_rng(3)).value == pytest.approx(10, abs=0.05)
    h = histogram(
        np.array([-5.0, 500.0]), np.array([0.0, 1.0, 2.0]), 50.0, rng=np.random.default_rng(3)
    )
    assert h.value.tolist() == [1, 1]


def test_high_epsilon_recovers_the_exact_statistics():
    gen = np.random.default_rng(4)
    x = gen.uniform(0, 100, 5000)
    assert mean(x, 0, 100, 1e4, rng=gen).value == pytest.approx(x.mean(), abs=1e-3)
    assert variance(x, 0, 100, 1e4, rng=gen).value == pytest.approx(x.var(), abs=1e-2)
    assert count(x, 1e4, rng=gen).value == 5000
    qv = quantiles(x, 0, 100, 1e4, n_candidates=10001, rng=gen).value
    # the noisy CDF coarsens to 1001 candidates (step 0.1) and reports the cell's middle
    assert qv == pytest.approx(np.quantile(x, [0.25, 0.5, 0.75]), abs=0.1)


def test_error_labels_do_not_depend_on_the_data():
    """Two very different data sets, same public inputs → the same expected error and widths."""
    a = np.random.default_rng(5).uniform(0, 10, 300)
    b = np.full(800, 9.5)
    for fn in (
        lambda v: mean(v, 0, 10, 0.5, n_estimate=500),
        lambda v: variance(v, 0, 10, 0.5, n_estimate=500),
        lambda v: quantiles(v, 0, 10, 0.5, n_estimate=500),
        lambda v: count(v, 0.5),
        lambda v: histogram(v, np.array([0.0, 5.0, 10.0]), 0.5),
    ):
        ra, rb = fn(a), fn(b)
        assert np.array_equal(ra.expected_error, rb.expected_error)
        assert ra.params == rb.params
        assert ra.scales == rb.scales
        assert ra.epsilon == rb.epsilon and ra.sensitivity == rb.sensitivity


def test_sums_are_exact_lattice_values():
    r = mean(
        np.random.default_rng(6).normal(0, 1, 10_000), -3, 3, 1.0, rng=np.random.default_rng(6)
    )
    for name, noisy in r.noisy.items():
        step = r.params["grid"][name]
        assert math.log2(step).is_integer()
        assert np.array_equal(noisy / step, np.rint(noisy / step))


# ---------------------------------------------------------------- noise laws and coverage


def test_histogram_cells_get_discrete_laplace_noise():
    """5000 empty groups × 4 bins = 20 000 independent cells: raw noise ~ DL(1/ε)."""
    keys = list(range(5000))
    eps = 0.7
    r = grouped_histogram(
        np.array([0.5]),
        np.array([0]),
        np.array([0.0, 1, 2, 3, 4]),
        keys,
        eps,
        rng=np.random.default_rng(7),
    )
    raw = np.asarray(r.noisy["count"]).ravel()
    raw[0] -= 1  # the one record
    support = np.arange(-80, 81)
    assert chi2_pvalue(raw, support, dlap_pmf(1 / eps, support)) > ALPHA
    assert r.expected_error.ravel()[0] == pytest.approx(dlap_abs_mean(1 / eps))


def coverage_ok(hits: np.ndarray, level: float = 0.95) -> bool:
    """One-sided binomial test of coverage ≥ level at α = 1e-4."""
    return stats.binomtest(int(hits.sum()), hits.size, level, alternative="less").pvalue > ALPHA


@pytest.mark.parametrize("eps", [0.2, 1.0])
def test_mean_and_variance_intervals_cover_and_errors_bound(eps):
    """3000 groups of 200 skewed values: the 95 % intervals cover the truth (≥ 95 %),
    and the labelled expected error is at least the realized mean absolute error."""
    gen = np.random.default_rng(8)
    g, n = 3000, 200
    groups = np.repeat(np.arange(g), n)
    x = gen.beta(0.5, 3.0, g * n) * 10
    true_mean = x.reshape(g, n).mean(axis=1)
    true_var = x.reshape(g, n).var(axis=1)
    m = grouped_mean(x, groups, list(range(g)), 0, 10, eps, n_estimate=n, rng=gen)
    v = grouped_variance(x, groups, list(range(g)), 0, 10, eps, n_estimate=n, rng=gen)
    assert coverage_ok((m.ci_low <= true_mean) & (true_mean <= m.ci_high))
    assert coverage_ok((v.ci_low <= true_var) & (true_var <= v.ci_high))
    for rel, truth in ((m, true_mean), (v, true_var)):
        realized = np.abs(rel.value - truth)
        # mean of 3000 errors: 4 standard errors above the label would be a real miss
        assert realized.mean() <= rel.expected_error.mean() + 4 * realized.std() / math.sqrt(g)


def test_count_interval_covers():
    gen = np.random.default_rng(9)
    g = 4000
    sizes = gen.integers(0, 30, g)
    groups = np.repeat(np.arange(g), sizes)
    h = grouped_histogram(
        np.zeros(groups.size), groups, np.array([-1.0, 1.0]), list(range(g)), 0.3, rng=gen
    )
    got = h.value[:, 0]
    assert coverage_ok((h.ci_low[:, 0] <= sizes) & (sizes <= h.ci_high[:, 0]))
    assert (got >= 0).all()


def test_quantile_mechanism_has_the_exponential_law():
    """4000 groups holding the same 7 values: each group's median is one EM draw
    (``method="independent"``: the per-level exponential mechanism)."""
    vals = np.array([0.5, 1.2, 3.3, 3.4, 6.0, 8.8, 9.9])
    g, c, eps = 4000, 11, 2.0
    x = np.tile(vals, g)
    groups = np.repeat(np.arange(g), vals.size)
    r = grouped_quantiles(
        x,
        groups,
        list(range(g)),
        0,
        10,
        eps,
        qs=[0.5],
        n_candidates=c,
        method="independent",
        rng=np.random.default_rng(10),
    )
    grid = np.linspace(0, 10, c)
    chosen = np.rint(r.value[:, 0] / (10 / (c - 1))).astype(int)
    assert np.allclose(grid[chosen], r.value[:, 0])
    below = np.array([(vals < cand).sum() for cand in grid])
    logits = -np.abs(below - 0.5 * vals.size) * eps / (2 * 0.5)
    probs = np.exp(logits - logits.max())
    assert chi2_pvalue(chosen, np.arange(c), probs) > ALPHA


def test_quantile_label_under_the_uniform_model_and_intervals_without_it():
    """Behaviour change (issue 10): the default box-plot mechanism is the noisy CDF, whose
    95 % intervals come from its own noise law and hold whatever the data, with or without
    a public size; the label (expected error) needs a public size and models evenly spread
    values."""
    gen = np.random.default_rng(11)
    g, n = 2000, 300
    x = gen.uniform(0, 10, g * n)
    groups = np.repeat(np.arange(g), n)
    r = grouped_quantiles(x, groups, list(range(g)), 0, 10, 0.5, qs=[0.5], n_estimate=n, rng=gen)
    truth = np.median(x.reshape(g, n), axis=1)
    assert coverage_ok((r.ci_low[:, 0] <= truth) & (truth <= r.ci_high[:, 0]))
    realized = np.abs(r.value[:, 0] - truth)
    assert realized.mean() == pytest.approx(r.expected_error[0, 0], rel=0.25)
    no_n = quantiles(x[:n], 0, 10, 0.5, rng=gen)
    assert np.isnan(no_n.expected_error).all()
    assert (no_n.ci_low <= no_n.value).all() and (no_n.value <= no_n.ci_high).all()
    assert (no_n.ci_high - no_n.ci_low < 10).all()


# ---------------------------------------------------------------- bad input


def test_bad_inputs_raise_readable_errors():
    x = np.array([1.0, 2.0])
    cases = [
        (InvalidEpsilonError, "privacy parameter", lambda: mean(x, 0, 1, 0.0)),
        (InvalidEpsilonError, "privacy parameter", lambda: count(x, math.nan)),
        (InvalidEpsilonError, "privacy parameter", lambda: histogram(x, ["a"], math.inf)),
        (InvalidBoundsError, "smaller than", lambda: mean(x, 1, 1, 1.0)),
        (InvalidBoundsError, "finite", lambda: variance(x, -math.inf, 1, 1.0)),
        (InvalidBoundsError, "numbers", lambda: quantiles(x, "low", 1, 1.0)),
        (InvalidBoundsError, "increasing", lambda: histogram(x, np.array([0.0, 2.0, 1.0]), 1.0)),
        (UnknownCategoryError, "'c'", lambda: histogram(["a", "c"], ["a", "b"], 1.0)),
        (UnknownCategoryError, "'w'", lambda: grouped_mean(x, ["x", "w"], ["x"], 0, 1, 1.0)),
        (UnknownCategoryError, "duplicates", lambda: histogram(["a"], ["a", "a"], 1.0)),
        (DataTypeError, "numeric", lambda: mean(["a", "b"], 0, 1, 1.0)),
        (DataTypeError, "numeric", lambda: mean(pd.Series(["a", "b"]), 0, 1, 1.0)),
        (
            DataTypeError,
            "numeric",
            lambda: variance(pd.to_datetime(pd.Series(["2020-01-01"])), 0, 1, 1.0),
        ),
        (DataTypeError, "same length", lambda: grouped_histogram(x, ["x"], ["a"], ["x"], 1.0)),
        (UnknownQueryError, "between 0 and 1", lambda: quantiles(x, 0, 1, 1.0, qs=[0.5, 1.2])),
        (UnknownQueryError, "n_candidates", lambda: quantiles(x, 0, 1, 1.0, n_candidates=1)),
        (DataTypeError, "n_estimate", lambda: mean(x, 0, 1, 1.0, n_estimate=math.nan)),
        (
            DataTypeError,
            "one per group",
            lambda: grouped_mean(x, ["a", "b"], ["a", "b"], 0, 1, 1.0, n_estimate=[1, 2, 3]),
        ),
        (DataTypeError, "n_estimate", lambda: quantiles(x, 0, 1, 1.0, n_estimate="many")),
    ]
    for error, text, call in cases:
        with pytest.raises(error, match=text):
            call()


@SETTINGS
@given(
    st.floats(-1e3, 1e3),
    st.floats(1e-3, 1e3),
    st.integers(1, 40),
    st.booleans(),
    seeds,
)
def test_bin_assignment_matches_searchsorted_on_and_between_edges(start, width, nb, even, seed):
    """The fast equal-width path must put every value, edges included, where searchsorted does."""
    gen = np.random.default_rng(seed)
    if even:
        edges = np.linspace(start, start + width, nb + 1)
    else:
        edges = np.unique(
            np.concatenate([[start, start + width], gen.uniform(start, start + width, nb)])
        )
    assume(edges.size >= 2 and (np.diff(edges) > 0).all())
    x = np.concatenate(
        [
            gen.uniform(start - width, start + 2 * width, 500),
            edges,
            np.nextafter(edges, -np.inf),
            np.nextafter(edges, np.inf),
        ]
    )
    expected = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, edges.size - 2)
    assert np.array_equal(_edge_index(edges)(x), expected)
    counts = histogram(x, edges, 1e6, rng=np.random.default_rng(seed)).value
    assert np.array_equal(counts, np.bincount(expected, minlength=edges.size - 1))


@SETTINGS
@given(
    hnp.arrays(np.float64, st.integers(1, 200), elements=st.floats(0.0, 10.0)),
    st.floats(-1e3, 1e3),
    seeds,
)
def test_adding_one_record_moves_each_sum_by_at_most_its_sensitivity(x, extra, seed):
    """Same seed, so the same noise: the difference is exactly the added record's lattice
    value, which must stay within the declared sensitivity, whether or not the new record
    pushes the data outside the bounds (the clamping fast path must not change the others)."""
    for fn in (mean, variance):
        a = fn(x, 0.0, 10.0, 1.0, rng=np.random.default_rng(seed))
        b = fn(np.append(x, extra), 0.0, 10.0, 1.0, rng=np.random.default_rng(seed))
        for name, sens in a.sensitivity.items():
            moved = abs(float(b.noisy[name][0]) - float(a.noisy[name][0]))
            assert moved <= sens, (fn.__name__, name, moved, sens)
        assert b.noisy["count"][0] - a.noisy["count"][0] == 1
