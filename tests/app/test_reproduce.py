"""Reproducibility export (issue 23): each released figure's report carries a Python script
that re-runs its mechanism with its public parameters on any table with the public schema.

The scripts of a published page's figures (a histogram, a mean, a box plot with a withheld
group, an ungrouped histogram) and of a variance on a per-patient dataset (at most k rows per
patient) run against a fresh table generated with another seed: each gives a release of the
same shape with the same mechanism and ε. The script holds no true value and no raw noisy sum.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from callbacks import explore as explore_callbacks
from services import reproduce
from services.data.sources.resolve import aggregates
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger import db as ledger_db
from services.views.inputs import with_bound
from services.views.queries import parse_request
from tests.app.conftest import SessionAs
from tests.app.partner_support import ROOT, write_table

OWNER = Identity("olga", Role.OWNER, True)
FRESH_SEED, FRESH_ROWS = 99, 2000
PUBLIC = {"release_id", "dataset", "dataset_version", "query", "view", "statistic", "x", "group",
          "groups", "cells", "mechanism", "epsilon", "epsilon_by_group", "noise_tier",
          "contribution", "patient_column", "n_estimate", "bins", "bin_kind", "lower", "upper",
          "aggregate_candidates", "n_candidates", "method", "qs"}
"""Everything a script's parameters may hold: public metadata of the release."""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """A table with the sample's schema that the hospital never held (another seed)."""
    return write_table(tmp_path_factory.mktemp("fresh") / "fresh.csv", seed=FRESH_SEED,
                       rows=FRESH_ROWS)


@pytest.fixture
def app(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path / "var", "budgets": {"third_party": 8.0}}, seed=11)
    services_of(app).identity = SessionAs(Role.OWNER, "olga")
    return app


def _run(source: str, table: Path, folder: Path, name: str) -> dict:
    script = folder / name
    script.write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script), str(table), "--seed", "3"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=folder)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _same_release(out: dict, answer: dict) -> None:
    """Same shape, mechanism and ε as the released answer."""
    groups, cells = answer["groups"], answer["cells"]
    assert out["groups"] == groups and out["cells"] == cells
    for key in ("values", "ci95_low", "ci95_high"):
        assert np.asarray(out[key], dtype=float).shape == (len(groups), len(cells)), key
    assert out["mechanism"] == answer["mechanism_label"]
    assert out["epsilon"] == pytest.approx(answer["epsilon"], rel=1e-12)
    expected = answer["group_epsilon"]
    assert [e is None for e in out["epsilon_by_group"]] == [e is None for e in expected]
    assert [e for e in out["epsilon_by_group"] if e is not None] == pytest.approx(
        [e for e in expected if e is not None], rel=1e-12)
    for g, eps in enumerate(answer["group_epsilon"]):
        values = np.asarray(out["values"][g], dtype=float)
        assert np.isnan(values).all() if eps is None else np.isfinite(values).all(), g


def _private_numbers(services, rel, ds) -> list[str]:
    """Texts of the release's true values and of its tier's raw noisy sums (at full
    precision: a short number such as 20.0 is also a bound or an edge)."""
    query = json.loads(rel.query_key.rsplit("|as=", 1)[0])
    req = parse_request({**query, "role": "owner"}, Role.OWNER, ds.schema)
    plan = services.releases.plan(OWNER, req, dataset=ds)
    truth = np.asarray(plan.truth(aggregates(ds, with_bound(plan.query(), ds.schema))))
    tier = services.ledger.tier(rel.dataset_version, rel.query_key.rsplit("|as=", 1)[0],
                                rel.tier)
    noisy = np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in tier.noisy.values()])
    values = np.concatenate([np.ravel(truth), noisy])
    return [repr(float(v)) for v in values[np.isfinite(values)] if len(repr(float(v))) >= 8]


def test_published_figures_scripts_rerun_on_a_fresh_table(app, fresh, tmp_path):
    from app import services_of
    from tests.app.test_publish_http import _publish

    services = services_of(app)
    client = app.server.test_client()
    services.ledger_clock = ledger_db.now
    slug = _publish(client, services)
    page = services.publish.store.get(slug)
    services.identity.set(Role.THIRD_PARTY, "tina")
    reports = client.get(f"/views/{slug}/reports.json").json["figures"]
    assert [r["release_id"] for r in reports] == [f.release_id for f in page.figures]
    ds = services.registry.get("pirads")
    views, withheld = set(), 0
    for report in reports:
        rel = services.ledger.served(report["release_id"])
        script = report["reproduce"]
        assert script["language"] == "python" and script["filename"].endswith(".py")
        source = script["source"]
        compile(source, script["filename"], "exec")
        for text in _private_numbers(services, rel, ds):
            assert text not in source, text
        assert set(script["parameters"]) <= PUBLIC, set(script["parameters"]) - PUBLIC
        out = _run(source, fresh, tmp_path, script["filename"])
        _same_release(out, rel.answer)
        assert out["reproduces_release"] == rel.id
        views.add(rel.answer["view"])
        withheld += sum(e is None for e in rel.answer["group_epsilon"])
    assert views == {"histogram", "mean", "median"} and withheld > 0


def test_explore_reports_carry_the_script_and_paper_mode_has_none(app, fresh, tmp_path):
    from app import services_of

    services = services_of(app)
    ds = services.registry.get("pirads")
    req = parse_request({"dataset": "pirads", "view": "variance", "x": "Age",
                         "group": "BPH", "mechanism": "sound", "role": "collaborator"},
                        Role.OWNER, ds.schema)
    (_answer, rid, _), = services.releases.answer_all(OWNER, [req], dataset=ds,
                                                      channel="explore", price=True)
    sent = explore_callbacks.export(services, "report", rid)
    report = json.loads(sent["content"])
    assert report["release_id"] == rid
    out = _run(report["reproduce"]["source"], fresh, tmp_path, "variance.py")
    _same_release(out, services.ledger.served(rid).answer)

    paper = parse_request({"dataset": "pirads", "view": "mean", "x": "Age", "group": None,
                           "mechanism": "paper", "role": "owner"}, Role.OWNER, ds.schema)
    (_answer, pid, _), = services.releases.answer_all(OWNER, [paper], dataset=ds,
                                                      channel="explore")
    report = json.loads(explore_callbacks.export(services, "report", pid)["content"])
    assert "reproduce" not in report
    assert reproduce.for_release(services.ledger.served(pid), ledger=services.ledger,
                                 registry=services.registry) is None


def test_a_per_patient_release_reruns_with_its_bound_on_rows(tmp_path, fresh):
    """A schema naming the patient column with k = 2: the script keeps at most 2 rows per
    patient of the fresh table, as the explorer does."""
    from app import create_app, services_of

    data = tmp_path / "data"
    data.mkdir()
    schema = json.loads((ROOT / "sample_data" / "pirads_cohort.schema.json").read_text())
    schema.update(dataset="clinic", patient_column="Anonym_ID", max_rows_per_patient=2)
    (data / "clinic.schema.json").write_text(json.dumps(schema), encoding="utf-8")
    write_table(data / "clinic.csv", seed=4, rows=600)
    app = create_app({"data_dir": tmp_path / "var", "dataset_paths": [data / "clinic.csv"]},
                     seed=5)
    services = services_of(app)
    ds = services.registry.get("clinic")
    assert ds.schema.contribution_bound == 2
    req = parse_request({"dataset": "clinic", "view": "median", "x": "Age", "group": "BPH",
                         "mechanism": "sound", "role": "owner"}, Role.OWNER, ds.schema)
    (_answer, rid, _), = services.releases.answer_all(OWNER, [req], dataset=ds,
                                                      channel="explore", price=True)
    rel = services.ledger.served(rid)
    script = reproduce.for_release(rel, ledger=services.ledger, registry=services.registry)
    assert script is not None
    assert script.parameters["contribution"] == 2
    assert script.parameters["patient_column"] == "Anonym_ID"
    out = _run(script.source, fresh, tmp_path, script.filename)
    _same_release(out, rel.answer)
    assert out["parameters"]["contribution"] == 2
    assert out["parameters"]["n_candidates"] == script.parameters["n_candidates"]


def test_no_script_when_the_schema_changed_since_the_release(app):
    from dataclasses import replace

    from app import services_of

    services = services_of(app)
    ds = services.registry.get("pirads")
    req = parse_request({"dataset": "pirads", "view": "mean", "x": "Age", "group": None,
                         "mechanism": "sound", "role": "owner"}, Role.OWNER, ds.schema)
    (_answer, rid, _), = services.releases.answer_all(OWNER, [req], dataset=ds,
                                                      channel="explore", price=True)
    rel = services.ledger.served(rid)
    tier = services.ledger.tier(rel.dataset_version, rel.query_key.rsplit("|as=", 1)[0],
                                rel.tier)
    assert reproduce.parameters(rel, ds.schema, tier) is not None
    age = replace(ds.schema.column("Age"), upper=110.0)
    assert reproduce.parameters(rel, ds.schema.with_column(age), tier) is None
    other = replace(tier, params={**tier.params, "epsilon_by_group": [0.123]})
    assert reproduce.parameters(rel, ds.schema, other) is None
