"""Studio runs through the ledger's door: recorded as not central DP, refused input charges
nothing, non-owners get no per-record copy, auto-tune's trail is what the ledger holds, the
report and the CSV say what they must."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dp_engine.errors import DPError
from dp_engine.release import ColumnChoice, Tolerances
from dp_engine.release.techniques import ColumnProblemsError
from services.identity.roles import Role
from services.identity.session import Identity
from services.studio.model_check import model_check
from services.studio.report import dp_csv, report, report_html
from services.studio.service import GUARANTEE

OWNER = Identity("olga", Role.OWNER, True)
COLLAB = Identity("carl", Role.COLLABORATOR, True)

CHOICES = [ColumnChoice("Age", "bounded_laplace", 1.0, "range"),
           ColumnChoice("Number_of_Lesions", "laplace", 0.5, "one"),
           ColumnChoice("BPH", "randomized_response", 1.0),
           ColumnChoice("Therapy", "exponential", 0.5),
           ColumnChoice("ProcedureValidatingPhysicianName", "mask")]


@pytest.fixture
def services(tmp_path):
    from app import create_app, services_of

    return services_of(create_app({"data_dir": tmp_path}, seed=7))


def test_run_is_recorded_as_not_central_dp(services):
    run = services.studio.run(OWNER, "pirads", CHOICES)
    assert run.record_epsilon == pytest.approx(3.0)
    rows = services.ledger.releases(dataset_id="pirads")
    assert len(rows) == 1 and not rows[0].dp and rows[0].epsilon == pytest.approx(3.0)
    assert "not central DP" in rows[0].mechanism
    st = services.ledger.status(role=Role.OWNER, dataset_id="pirads", user="olga")
    assert st.role.spent == 0 and st.dataset.loss == 0          # outside sound-mode totals
    assert st.dataset.unsound_loss == pytest.approx(3.0)
    assert run.served.charged == 0 and run.answer["guarantee"] == GUARANTEE
    assert set(run.copy.frame.columns) == {c.name for c in CHOICES}
    # a second identical run is a new draw with its own row: runs add up
    services.studio.run(OWNER, "pirads", CHOICES)
    st = services.ledger.status(role=Role.OWNER, dataset_id="pirads", user="olga")
    assert st.dataset.unsound_loss == pytest.approx(6.0)


def test_non_owner_gets_no_per_record_copy(services):
    with pytest.raises(DPError, match="owner"):
        services.studio.run(COLLAB, "pirads", CHOICES)
    assert services.ledger.count_releases() == 0


@pytest.mark.parametrize("bad", [ColumnChoice("Age", "laplace", 0.0),
                                 ColumnChoice("Therapy", "laplace", 1.0),
                                 ColumnChoice("LastModified", "bounded_laplace", 1.0)])
def test_bad_input_charges_nothing(services, bad):
    with pytest.raises(ColumnProblemsError) as err:
        services.studio.run(OWNER, "pirads", [*CHOICES[1:], bad] if bad.name == "Age"
                            else [*CHOICES, bad])
    assert bad.name in err.value.problems
    assert services.ledger.count_releases() == 0
    assert services.ledger.status(role=Role.OWNER, dataset_id="pirads",
                                  user="olga").dataset.unsound_loss == 0


def test_auto_tune_trail_matches_ledger(services):
    result, runs = services.studio.auto_tune(
        OWNER, "pirads", CHOICES[:2], Tolerances(max_privacy_error=2.0), budget=10.0)
    assert len(runs) == len(result.tries) >= 2
    costs = [t.cost for t in result.tries]
    assert costs == pytest.approx([1.5 * 2 ** i for i in range(len(costs))])
    rows = services.ledger.releases(dataset_id="pirads")
    assert sorted(r.epsilon for r in rows) == pytest.approx(sorted(costs))
    assert result.spent == pytest.approx(sum(costs)) and result.spent <= 10.0
    assert result.stopped in ("tolerance", "budget")


def test_report_and_csv(services):
    run = services.studio.run(OWNER, "pirads", CHOICES)
    ds = services.registry.get("pirads")
    mc = model_check(ds.frame, run.copy.frame, ds.schema, "BPH", paired=True)
    rep = report(run.answer, dataset="pirads", release_id=run.served.release_id,
                 model=mc.to_dict())
    assert rep["central_dp"] is False and rep["record_epsilon"] == pytest.approx(3.0)
    assert {c["column"]: c["epsilon"] for c in rep["columns"]}["Therapy"] == 0.5
    assert {c["column"]: c["sensitivity"] for c in rep["columns"]}["Age"] == 80.0
    assert {c["column"]: c["sensitivity"] for c in rep["columns"]}["Number_of_Lesions"] == 1.0
    assert set(rep["metrics"]["columns"]) == {c.name for c in CHOICES}
    assert 0 <= rep["model_check"]["original"]["accuracy"] <= 1
    json.dumps(rep, allow_nan=False)                     # strict JSON
    page = report_html(rep)
    assert "not central differential privacy" in page.lower() and "<script" not in page
    csv = dp_csv(pd.DataFrame({"=x": ["=cmd()", "+1+cmd", "ok", "@a", None],
                               "n": [-1, 2, 3, 4, 5]}))
    assert csv.splitlines()[0] == "'=x,n"
    assert "'=cmd()" in csv and "'+1+cmd" in csv and "'@a" in csv and "\n-1" not in csv
    assert ",-1" in csv                                  # numbers stay numbers


def test_model_check_scores_a_perfect_copy_like_the_original(services):
    ds = services.registry.get("pirads")
    cols = ["Age", "Number_of_Lesions", "PIRADS score", "BPH"]
    same = ds.frame[cols].copy()
    mc = model_check(ds.frame, same, ds.schema, "BPH", paired=True)
    assert mc.original == mc.dp
    assert np.allclose(mc.cluster_original, mc.cluster_dp)
