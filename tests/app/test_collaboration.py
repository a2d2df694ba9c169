"""The collaboration scenario holds its promises on SQLite and on PostgreSQL (issue 21).

``bench/bench_collaboration.py`` drives a whole collaboration over HTTP with real sign-ins
(the owner, two collaborators and two third parties, a published page, then a third party
pressing everything it can); this runs it with a short final burst and checks what does not
depend on timing: the dataset's loss stays a third of the cap, the partners hold the paper's
figures, no large group is withheld, nothing is refused for budget, every charge is the price
the screen showed, the burst grows the loss by no more than it was charged, and the ledger's
books add up.
"""

from __future__ import annotations

import os

import pytest

from bench.bench_collaboration import LOSS_TARGET, run_all

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_collaboration_fits_the_budget_and_its_books_add_up(backend):
    url = None
    if backend == "postgresql":
        url = os.environ.get("TEST_DATABASE_URL")
        if not url:
            pytest.skip("TEST_DATABASE_URL is not set")
    run, loss, hammered, problems, big, held = run_all(url, seconds=5.0)
    assert loss <= LOSS_TARGET, loss
    assert held
    assert big == []
    assert run.refusals == []
    for step in run.steps:
        assert step.outcome in ("released", "priced", "free"), step
        if step.outcome != "free" and step.shown is not None:
            assert float(f"{step.charged:.3g}") == step.shown, step
        assert step.loss_added <= step.charged + 1e-9, step     # whoever causes it pays
    assert hammered["grown"] <= hammered["charged"] + 1e-9
    assert problems == []
