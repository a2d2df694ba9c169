"""Budgets are data, not deployment (issue 21 item 7).

The owner changes a role's budget, a per-user limit or a dataset's cap on the Ledger page; the
change is kept in the ledger with who and when, and binds the very next request on every
worker (another ``Ledger`` on the same database sees it at once). Anyone else posting the
same callback changes nothing. Every input is untrusted.
"""

from __future__ import annotations

import pytest

from callbacks import ledger as ledger_cb
from dp_engine.errors import BudgetExceededError
from services.identity.roles import Role
from services.ledger.store import Ledger
from tests.app.conftest import SessionAs
from tests.app.test_concurrency_support import answer, toy_plan, toy_release


@pytest.fixture
def app(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path}, seed=3)
    services_of(app).identity = SessionAs(Role.OWNER, "olga")
    return app


def test_a_budget_set_on_the_page_binds_the_next_request_on_every_worker(app, tmp_path):
    from app import services_of

    services = services_of(app)
    other_worker = Ledger(services.config.ledger_url)
    message, block = ledger_cb.save_setting(services, "pirads", "budget:third_party", 0.3)
    assert "now ε 0.3" in str(message) and block is not None
    plan = toy_plan("q", role=Role.THIRD_PARTY, eps=0.5, dataset="pirads")
    with pytest.raises(BudgetExceededError, match="spent 0 of 0.3"):
        other_worker.release(plan, toy_release, answer({}), user="tina")
    assert other_worker.policy_for("pirads").limit(Role.THIRD_PARTY) == 0.3
    assert other_worker.policy_for("another").limit(Role.THIRD_PARTY) == 5.0   # per dataset
    ledger_cb.save_setting(services, "*", "dataset_cap", None)                  # no cap
    assert other_worker.policy_for("another").dataset_cap is None
    (latest, first) = other_worker.policy_history()
    assert (latest.user, latest.dataset_id, latest.key, latest.value) == (
        "olga", "*", "dataset_cap", None)
    assert (first.dataset_id, first.key, first.value) == ("pirads", "budget:third_party", 0.3)
    page = str(ledger_cb.page_view(services, services.identity.current()))
    assert "Third parties' budget" in page and "set here" in page
    other_worker.close()


@pytest.mark.parametrize(("dataset", "key", "value"), [
    ("nope", "budget:third_party", 1.0), ("pirads", "budget:admin", 1.0),
    ("pirads", "budget:third_party", -1.0), ("pirads", "budget:third_party", "1e9; DROP"),
    ("pirads", "budget:third_party", float("nan")), (["pirads"], "dataset_cap", 1.0),
    ("pirads", "budget:third_party", True)])
def test_bad_settings_are_refused_with_a_plain_message_and_nothing_recorded(app, dataset, key,
                                                                             value):
    from app import services_of

    services = services_of(app)
    message, _ = ledger_cb.save_setting(services, dataset, key, value)
    assert "alert-warning" in str(message) or "'color': 'warning'" in str(message) \
        or "warning" in str(message)
    assert services.ledger.policy_history() == []


def test_only_the_owner_can_change_a_budget(app):
    from app import services_of

    services = services_of(app)
    for role in (Role.COLLABORATOR, Role.THIRD_PARTY):
        services.identity = SessionAs(role, "mallory")
        ledger_cb.save_setting(services, "pirads", "budget:third_party", 100.0)
    assert services.ledger.policy_history() == []
    assert services.ledger.policy_for("pirads").limit(Role.THIRD_PARTY) == 5.0
