"""The synthetic copy through the ledger's door: the ε charged is OpenDP's accountant's,
a non-owner may request it and pays for it, the output stays in the public domain, its
1-way marginals are close on the sample cohort at ε 4, non-owners get no comparison with
the original, bad ε charges nothing. mbi runs few iterations here (post-processing only)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_engine.errors import DPError
from dp_engine.release.synthetic import encode, marginal, synth_domain
from services.identity.roles import Role
from services.identity.session import Identity
from services.studio.accounting import opendp_epsilon
from services.studio.report import report

OWNER = Identity("olga", Role.OWNER, True)
COLLAB = Identity("carl", Role.COLLABORATOR, True)
ITERS = 100


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    from app import create_app, services_of

    svc = services_of(create_app({"data_dir": tmp_path_factory.mktemp("synth")}, seed=7))
    svc.studio.synthetic_iters = ITERS
    return svc


@pytest.fixture(scope="module")
def owner_copy(services):
    return services.studio.synthesize(OWNER, "pirads", 4.0)


def test_charged_epsilon_is_the_opendp_accountants(services, owner_copy):
    r = owner_copy
    assert r.served.charged == opendp_epsilon(r.plan) == r.epsilon
    assert r.epsilon == pytest.approx(4.0, rel=1e-9)
    row = next(x for x in services.ledger.releases(dataset_id="pirads")
               if x.answer.get("run_id") == r.run_id)
    assert row.dp and row.epsilon == r.epsilon and row.dataset_loss == r.epsilon
    assert r.answer["epsilon"] == r.epsilon and r.answer["rows"] == r.rows


def test_output_stays_in_the_public_domain(owner_copy):
    r, schema = owner_copy, owner_copy.schema
    assert set(r.skipped) == {"Anonym_ID", "ProcedureValidatingPhysicianName", "LastModified"}
    for name in r.frame.columns:
        spec = schema.column(name)
        values = r.frame[name].dropna()
        if spec.categories:
            assert {str(v) for v in values} <= {str(c) for c in spec.categories}, name
        else:
            assert values.between(spec.lower, spec.upper).all(), name
    assert abs(r.rows - 920) < 100              # n̂: Laplace scale 1 / (0.04 · 4) ≈ 6


def test_one_way_marginals_are_close_at_epsilon_4(services, owner_copy):
    """TV distance of each column's distribution (levels incl. missing) vs the original.

    Bound: a 1-way marginal's Laplace noise (scale b = 13 / (0.32 · 4) ≈ 10 per level) gives
    an expected L1 error ≤ L·b over L levels, i.e. TV ≤ L·b / (2n); sampling n̂ rows adds
    about √(L / n) / 2. With L ≤ 18 and n = 920: ≈ 0.10 + 0.07. Allow 0.25.
    """
    ds = services.registry.get("pirads")
    dom = synth_domain(ds.schema, list(owner_copy.frame.columns))
    orig = encode(ds.frame, ds.schema, dom)
    synth = encode(owner_copy.frame, ds.schema, dom)
    b = owner_copy.plan.one_way_scale
    for j, attr in enumerate(dom.attributes):
        p = marginal(orig, dom.sizes, (j,)) / len(orig)
        q = marginal(synth, dom.sizes, (j,)) / len(synth)
        bound = attr.size * b / (2 * len(orig)) + math.sqrt(attr.size / len(orig)) / 2
        assert 0.5 * np.abs(p - q).sum() < min(0.25, 1.5 * bound), attr.name
    m = owner_copy.metrics
    assert m is not None and math.isnan(m.columns["Age"].privacy_match)   # no row pairing
    assert m.columns["Age"].ks < 0.25 and m.columns["Therapy"].total_variation < 0.25


def test_non_owner_may_request_it_and_pays(services):
    before = services.ledger.status(role=Role.COLLABORATOR, dataset_id="pirads", user="carl")
    r = services.studio.synthesize(COLLAB, "pirads", 1.0, columns=["Age", "BPH", "Therapy"])
    after = services.ledger.status(role=Role.COLLABORATOR, dataset_id="pirads", user="carl")
    assert after.role.spent == pytest.approx(before.role.spent + r.epsilon)
    assert r.epsilon == opendp_epsilon(r.plan) == pytest.approx(1.0)
    assert r.metrics is None                                     # nothing compared
    assert "metrics" not in r.answer and list(r.frame.columns) == ["Age", "BPH", "Therapy"]
    with pytest.raises(DPError, match="owner"):
        services.studio.synthetic_model_check(COLLAB, r, "BPH")


@pytest.mark.parametrize("eps", [0, -1, "abc", math.inf, 1e6])
def test_bad_epsilon_charges_nothing(services, eps):
    n = services.ledger.count_releases()
    with pytest.raises(DPError, match="ε"):
        services.studio.synthesize(COLLAB, "pirads", eps)
    assert services.ledger.count_releases() == n


@pytest.mark.parametrize(("columns", "message"), [(["nope"], "no column named"),
                                                  (["Anonym_ID", "LastModified"],
                                                   "No column can be synthesized")])
def test_bad_columns_charge_nothing(services, columns, message):
    n = services.ledger.count_releases()
    with pytest.raises(DPError, match=message):
        services.studio.synthesize(COLLAB, "pirads", 1.0, columns=columns)
    assert services.ledger.count_releases() == n


def test_over_budget_is_refused_and_charges_nothing(services):
    third = Identity("tess", Role.THIRD_PARTY, True)
    with pytest.raises(DPError):
        services.studio.synthesize(third, "pirads", 5.5)          # budget 5
    st = services.ledger.status(role=Role.THIRD_PARTY, dataset_id="pirads", user="tess")
    assert st.role.spent == 0


def test_model_check_for_the_owner(services, owner_copy):
    mc = services.studio.synthetic_model_check(OWNER, owner_copy, "BPH")
    assert mc.test_rows == int(0.3 * 920) and "optimistic" in mc.note
    assert 0 <= mc.dp.accuracy <= 1 and 0 <= mc.original.auc <= 1
    rep = report(owner_copy.answer | {"choices": [], "metrics": {}}, dataset="pirads",
                 release_id=None, synthetic=owner_copy.summary(mc))
    assert rep["synthetic"]["epsilon"] == owner_copy.epsilon
    assert rep["synthetic"]["model_check"]["target"] == "BPH"
    assert rep["synthetic"]["metrics"]["columns"]["Age"]["privacy_match"] is None   # NaN


def test_missing_libraries_are_a_clear_message(services, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mbi" else real(name, *a))
    n = services.ledger.count_releases()
    with pytest.raises(DPError, match="studio"):
        services.studio.synthesize(COLLAB, "pirads", 1.0)
    assert services.ledger.count_releases() == n
