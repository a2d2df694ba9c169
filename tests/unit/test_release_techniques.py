"""Output domains and bad-input checks of the studio's per-record techniques."""

import math

import numpy as np
import pandas as pd
import pytest

from dp_engine.release.techniques import (
    TOKEN_LENGTH,
    ColumnChoice,
    ColumnProblemsError,
    Technique,
    check_choices,
    per_record_copy,
    record_epsilon,
)
from dp_engine.schema import ColumnSpec, Schema

SCHEMA = Schema("t", (
    ColumnSpec("age", "numeric", lower=20, upper=100, bin_width=5),
    ColumnSpec("score", "ordinal", lower=1, upper=5, categories=(1, 2, 3, 4, 5)),
    ColumnSpec("flag", "boolean", categories=(False, True)),
    ColumnSpec("dept", "categorical", categories=("UROL", "RADI", "ONKO")),
    ColumnSpec("name", "free_text"),
    ColumnSpec("nobounds", "numeric"),
    ColumnSpec("empty", "numeric", lower=0, upper=1, bin_width=0.1),
))


def _frame(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": np.where(rng.random(n) < 0.05, np.nan, rng.uniform(0, 130, n)),
        "score": pd.array(rng.integers(1, 6, n), dtype="Int64"),
        "flag": pd.array(np.where(rng.random(n) < 0.1, None, rng.random(n) < 0.3),
                         dtype="boolean"),
        "dept": pd.Series(rng.choice(["UROL", "RADI", "ONKO", None], n), dtype=object),
        "name": ["x" * int(k) for k in rng.integers(1, 30, n)],
        "nobounds": rng.normal(size=n),
        "empty": np.full(n, np.nan),
    })


def _copy(choices, seed=1):
    return per_record_copy(_frame(), SCHEMA, choices, rng=np.random.default_rng(seed))


def test_bounded_laplace_stays_in_bounds_and_laplace_does_not():
    out = _copy([ColumnChoice("age", "bounded_laplace", 0.1, "range"),
                 ColumnChoice("score", "bounded_laplace", 0.1, "range")]).frame
    assert out["age"].between(20, 100).all() and out["age"].notna().all()
    assert set(out["score"].unique()) <= {1, 2, 3, 4, 5}
    wide = _copy([ColumnChoice("age", "laplace", 0.1, "range")]).frame
    assert not wide["age"].between(20, 100).all()        # plain Laplace is unbounded


def test_randomized_response_stays_boolean_and_exponential_in_list():
    out = _copy([ColumnChoice("flag", "randomized_response", 1.0),
                 ColumnChoice("dept", "exponential", 1.0),
                 ColumnChoice("score", "exponential", 1.0)]).frame
    assert out["flag"].dtype == bool
    assert set(out["dept"].astype(str)) <= {"UROL", "RADI", "ONKO"}
    assert out["dept"].notna().all()                     # missing cells get a category too
    assert set(out["score"]) <= {1, 2, 3, 4, 5}


def test_randomized_response_keeps_truth_at_rate_e_eps_over_1_plus_e_eps():
    f = pd.DataFrame({"flag": np.ones(40_000, dtype=bool)})
    out = per_record_copy(f, SCHEMA, [ColumnChoice("flag", "randomized_response", 1.0)],
                          rng=np.random.default_rng(3)).frame
    p = math.e / (1 + math.e)
    assert out["flag"].mean() == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / 40_000))


def test_masking_leaks_no_length_and_drop_removes():
    cp = _copy([ColumnChoice("name", "mask"), ColumnChoice("dept", "drop")])
    lengths = cp.frame["name"].str.len()
    assert (lengths == TOKEN_LENGTH).all() and "dept" not in cp.frame
    assert cp.frame["name"].nunique() > 1990               # no linkage between equal values
    assert cp.record_epsilon == 0.0 and cp.dropped == ("dept",)


def test_record_epsilon_sums_columns_and_keep_is_flagged():
    choices = [ColumnChoice("age", "laplace", 0.5), ColumnChoice("flag", "randomized_response",
                                                                  1.25),
               ColumnChoice("name", "keep")]
    cp = _copy(choices)
    assert cp.record_epsilon == record_epsilon(choices) == pytest.approx(1.75)
    assert cp.kept == ("name",) and "NOT private" in cp.notes[0]


@pytest.mark.parametrize(("choice", "words"), [
    (ColumnChoice("age", "laplace", 0.0), "greater than 0"),
    (ColumnChoice("age", "laplace", -1.0), "greater than 0"),
    (ColumnChoice("age", "laplace", None), "greater than 0"),
    (ColumnChoice("nobounds", "bounded_laplace", 1.0), "bound"),
    (ColumnChoice("name", "laplace", 1.0), "does not fit"),
    (ColumnChoice("age", "randomized_response", 1.0), "does not fit"),
    (ColumnChoice("nosuch", "mask"), "not a column"),
])
def test_bad_choices_name_the_column(choice, words):
    problems = check_choices(SCHEMA, [choice, ColumnChoice("dept", "exponential", 1.0)])
    assert list(problems) == [choice.name] and words in problems[choice.name]


def test_all_missing_column_refused_before_anything_is_drawn():
    with pytest.raises(ColumnProblemsError) as err:
        _copy([ColumnChoice("empty", "bounded_laplace", 1.0), ColumnChoice("age", "mask")])
    assert list(err.value.problems) == ["empty"]


def test_technique_labels():
    assert all(t.label for t in Technique)
