"""Runs named by what they are (issue 23 item 4): a per-record run and a synthetic copy are
listed in Explore's My releases (and on the Ledger page) by name, technique and ε, not as
"query of ? · low noise"; choosing one in My releases says it is a table of the Release page
(no failure, no traceback)."""

from __future__ import annotations

import pytest

from dp_engine.release import ColumnChoice
from services.identity.roles import Role
from services.views.report import query_words
from tests.app.explore_client import preview, reopen
from tests.app.test_studio_service import CHOICES

TITLE = "PI-RADS cohort (synthetic, 920 reports)"


@pytest.fixture
def services(explore_app):
    from app import services_of

    s = services_of(explore_app)
    s.studio.synthetic_iters = 20            # post-processing only: keep it quick
    return s


def test_my_releases_name_a_per_record_run_by_what_it_is(client, services, session):
    run = services.studio.run(session.current(), "pirads", CHOICES)
    labels = {o["value"]: o["label"] for o in preview(client).reopen_options()}
    record = labels[str(run.served.release_id)]
    assert record.startswith(f"Per-record copy of {TITLE} · ")
    assert "bounded Laplace, Laplace, randomized response +1" in record
    assert "Σ ε 3 per record (local DP, not central)" in record and "· you ·" in record
    assert "?" not in record and "low noise" not in record and "paper mode" not in record
    # the Ledger page names it the same way
    (stored,) = services.ledger.releases()
    assert query_words(stored.answer) == record.split(" · you ·")[0]

    shown = reopen(client, str(run.served.release_id))
    assert shown.status == 200 and "could not be computed" not in shown.text
    assert f"Release #{run.served.release_id} is a table from the Release page" in \
        shown.message


def test_a_synthetic_copy_is_named_in_its_roles_list(client, services, session):
    session.set(Role.COLLABORATOR, "carl")
    syn = services.studio.synthesize(session.current(), "pirads", 0.5)
    options = preview(client, role="collaborator").reopen_options()
    assert [o["label"].split(" · you")[0] for o in options] == [
        f"Synthetic copy of {TITLE} · MST · ε {syn.epsilon:.3g} (central DP) · "
        f"n̂ {syn.rows:,} rows"]


def test_columns_kept_as_is_are_named_as_not_private(services, session):
    choices = [ColumnChoice("Age", "keep"), ColumnChoice("Therapy", "exponential", 0.5)]
    run = services.studio.run(session.current(), "pirads", choices)
    assert query_words(run.answer) == (
        f"Per-record copy of {TITLE} · exponential mechanism · Σ ε 0.5 per record (local DP, "
        "not central) · 1 column NOT private")
