"""End-to-end anonymization: bad input, missing values, mixed kinds, report figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_engine.anonymize import LABEL, AnonymizationError, anonymize
from dp_engine.errors import DPError, EmptyDataError, SchemaError


def cohort(n: int = 300, seed: int = 0) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": gen.integers(40, 90, n).astype(float),
            "sex": gen.choice(["F", "M"], n),
            "zip": gen.choice(["13053", "13068", "14853", "14850", "20001"], n),
            "visit": pd.to_datetime("2020-01-01") + pd.to_timedelta(gen.integers(0, 900, n), "D"),
            "smoker": gen.choice([True, False], n),
            "pirads": gen.integers(1, 6, n),
            "gleason": gen.choice([6, 7, 8, 9], n),
            "diagnosis": gen.choice(["benign", "cancer", "other"], n),
        }
    )


QIS = ["age", "sex", "zip", "visit", "smoker", "pirads"]
KINDS = {"zip": "hierarchical", "pirads": "ordinal"}


def k_of(frame: pd.DataFrame, qis) -> int:
    return int(frame.groupby(list(qis), dropna=False).size().min())


@pytest.mark.parametrize("method", ["hybrid", "mdav"])
@pytest.mark.parametrize("mode", ["flatten", "shuffle", "redraw"])
def test_mixed_kinds_are_exactly_k_anonymous(method, mode):
    frame = cohort()
    res = anonymize(
        frame,
        QIS,
        ["gleason", "diagnosis"],
        5,
        method=method,
        kinds=KINDS,
        sensitive_mode=mode,
        rng=np.random.default_rng(3),
    )
    assert k_of(res.released, QIS) >= 5 == res.k
    assert res.report.k_achieved == k_of(res.released, QIS)
    assert res.label == LABEL == "k-anonymity, not differential privacy"
    assert list(res.released.columns) == [
        c for c in frame.columns if c in QIS + ["gleason", "diagnosis"]
    ]
    for col in ("sex", "zip", "smoker", "diagnosis"):
        assert set(res.released[col]) <= set(frame[col])
    assert res.released["visit"].dtype == frame["visit"].dtype


def test_sensitive_modes_keep_group_values():
    frame = cohort()
    flat = anonymize(frame, QIS, ["gleason"], 5, kinds=KINDS, rng=np.random.default_rng(1))
    groups = flat.groups
    per_group = pd.Series(flat.released["gleason"].to_numpy()).groupby(groups).nunique()
    assert per_group.max() == 1  # Eq. 9
    shuf = anonymize(
        frame,
        QIS,
        ["gleason"],
        5,
        kinds=KINDS,
        sensitive_mode="shuffle",
        rng=np.random.default_rng(1),
    )
    for g in np.unique(shuf.groups):
        m = shuf.groups == g
        assert sorted(shuf.released["gleason"][m]) == sorted(frame["gleason"][m])


def test_vq_reports_the_k_it_reaches():
    frame = cohort()
    res = anonymize(
        frame, QIS, ["diagnosis"], 5, method="vq", kinds=KINDS, rng=np.random.default_rng(2)
    )
    assert res.report.k_achieved == k_of(res.released, QIS)
    assert np.bincount(res.groups).min() >= 5  # every cluster reaches k after the moves
    assert res.move is not None


def test_release_is_shuffled_and_has_no_group_ids():
    frame = cohort(120)
    res = anonymize(frame, ["age", "sex"], ["diagnosis"], 4, rng=np.random.default_rng(5))
    out = res.release(np.random.default_rng(6))
    assert list(out.columns) == ["age", "sex", "diagnosis"]
    assert list(out.index) == list(range(120))
    key = ["age", "sex", "diagnosis"]
    assert sorted(map(tuple, out[key].astype(str).to_numpy())) == sorted(
        map(tuple, res.released[key].astype(str).to_numpy())
    )
    assert not out[key].astype(str).equals(res.released[key].astype(str).reset_index(drop=True))


def test_missing_quasi_identifiers_are_kept_as_their_own_value():
    frame = cohort(200, seed=4)
    frame.loc[:9, "age"] = np.nan
    res = anonymize(frame, ["age", "sex"], [], 5, rng=np.random.default_rng(0))
    assert k_of(res.released, ["age", "sex"]) >= 5
    assert res.released.loc[:9, "age"].isna().all()
    assert res.released["age"].isna().sum() == 10


def test_single_valued_column_is_left_alone_with_a_note():
    frame = cohort(100)
    frame["site"] = "Helsinki"
    res = anonymize(frame, ["age", "site"], [], 5, rng=np.random.default_rng(0))
    assert (res.released["site"] == "Helsinki").all()
    assert any("site" in note for note in res.notes)
    assert k_of(res.released, ["age", "site"]) >= 5
    only = anonymize(frame, ["site"], [], 5)
    assert only.report.k_achieved == 100


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"qis": ["age"], "k": 1000}, AnonymizationError, "larger than the number of records"),
        ({"qis": [], "k": 3}, AnonymizationError, "at least one quasi-identifier"),
        ({"qis": ["age"], "k": 1}, AnonymizationError, "at least 2"),
        ({"qis": ["nope"], "k": 3}, SchemaError, "no column named"),
        ({"qis": ["age"], "k": 3, "sensitive": ["age"]}, AnonymizationError, "both"),
        ({"qis": ["age"], "k": 3, "radii": {"age": -1}}, AnonymizationError, "radius"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(kwargs, error, words):
    with pytest.raises(error, match=words) as info:
        anonymize(cohort(50), **kwargs)
    assert isinstance(info.value, DPError)


def test_empty_frame_is_refused():
    with pytest.raises(EmptyDataError):
        anonymize(cohort(0), ["age"], [], 2)


def test_k_equal_to_n_gives_one_group():
    frame = cohort(12)
    res = anonymize(frame, ["age", "zip"], [], 12, kinds=KINDS)
    assert res.report.k_achieved == 12 and res.report.n_classes == 1


def test_report_figures_match_independent_computations():
    frame = cohort(200, seed=9)
    qis = ["age", "sex", "pirads"]
    res = anonymize(
        frame,
        qis,
        ["diagnosis", "gleason"],
        4,
        rng=np.random.default_rng(2),
        sensitive_mode="shuffle",
    )
    rep, rel = res.report, res.released
    sizes_before = frame.groupby(qis)["age"].transform("size")
    assert rep.unique_before == pytest.approx((sizes_before == 1).mean())
    assert rep.unique_after == 0.0
    classes = rel.groupby(qis).ngroup()
    for col in ("diagnosis", "gleason"):
        assert rep.l_diversity[col] == rel[col].groupby(classes).nunique().min()
        assert rep.l_diversity_true[col] == frame[col].groupby(classes).nunique().min()
    x, y = frame["age"].to_numpy(float), rel["age"].to_numpy(float)
    p, q = frame["pirads"].to_numpy(float), rel["pirads"].to_numpy(float)
    sse = ((x - y) ** 2).sum() / x.var() + ((p - q) ** 2).sum() / p.var()
    sst = len(x) * 2
    assert rep.sse_sst_pct == pytest.approx(100 * sse / sst)
    il1 = (np.abs(x - y) / x.std() + np.abs(p - q) / p.std()).sum() / (
        np.sqrt(2) * 2 * 200
    )  # age and pirads are the ordered QIs
    assert rep.il1s == pytest.approx(il1)
    stats = rep.cluster_stats.set_index("column")
    assert stats.loc["age", "mean before"] == pytest.approx(x.mean())
    assert stats.loc["gleason", "variance after"] == pytest.approx(rel["gleason"].var(ddof=0))
    assert set(rep.distance_kl) == {"quasi-identifiers", "sensitive"}
    assert all(v >= 0 for v in rep.distance_wasserstein.values())
