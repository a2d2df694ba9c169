"""The one door, as a user meets it: what the panel says was spent is what the ledger charged,
internal work is nobody's spending, every delivery is logged, and a release costs at most two
SQL transactions (one when cached) on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import event

from dp_engine.errors import DPError
from layouts import ids
from layouts.components.figures import fmt
from services.data.registry import DatasetRegistry
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger.audit import check_invariants
from services.ledger.policy import BudgetPolicy
from services.ledger.store import Ledger
from services.views.inputs import calibration_epsilon
from services.views.queries import ViewRequest
from services.views.releases import ReleaseService, new_rng_factory
from tests.app.conftest import SessionAs
from tests.app.explore_client import render
from tests.app.test_ledger import BACKENDS, backend_for


def _find(node: Any, component_id: str) -> Any:
    """The children of the component ``component_id`` in a Dash JSON tree."""
    if isinstance(node, dict):
        props = node.get("props", {})
        if props.get("id") == component_id:
            return props.get("children")
        for value in node.values():
            found = _find(value, component_id)
            if found is not None:
                return found
    elif isinstance(node, list):
        for value in node:
            found = _find(value, component_id)
            if found is not None:
                return found
    return None


def _panel(reply, component_id: str) -> str:
    return str(_find(reply.prop(ids.EX_PANEL), component_id))


def _app(tmp_path, budgets: dict | None = None, role: Role = Role.OWNER, user: str | None = None):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path, "budgets": budgets or {}}, seed=9)
    services = services_of(app)
    services.identity = SessionAs(role, user)
    return app, services


# -- what the panel says is what the ledger charged --------------------------------------------

def test_owner_budget_grows_by_exactly_the_epsilon_the_panel_shows(client, explore_app):
    from app import services_of

    ledger = services_of(explore_app).ledger
    shown = []
    for view, group in (("mean", "PIRADS score"), ("histogram", "PIRADS score"),
                        ("median", "Prostatitis")):
        services_of(explore_app).releases.prepare(       # a new grouping's sizes, priced
            Identity("test-owner", Role.OWNER, True),
            ViewRequest("pirads", view, "Age", group, "sound", Role.OWNER))
        before = ledger.budget(role=Role.OWNER, dataset_id="pirads").spent
        reply = render(client, view=view, group=group)
        after = ledger.budget(role=Role.OWNER, dataset_id="pirads").spent
        charged = ledger.releases(limit=1)[0].epsilon
        assert after - before == pytest.approx(charged, abs=1e-12)
        assert _panel(reply, ids.PANEL_SPENT) == fmt(charged)          # what the panel says
        assert _panel(reply, ids.PANEL_EPSILON) == fmt(charged)        # the view's own ε
        shown.append(charged)
    priced = sum(r.epsilon for r in ledger.releases(role=Role.OWNER)
                 if r.query_key.startswith("internal:sizes:"))       # the groupings' sizes
    assert priced == pytest.approx(0.5)
    assert ledger.budget(role=Role.OWNER, dataset_id="pirads").spent == pytest.approx(
        sum(shown) + priced)
    assert check_invariants(ledger) == []


def test_paper_mode_is_recorded_as_not_dp_and_charges_no_sound_budget(client, explore_app):
    from app import services_of

    ledger = services_of(explore_app).ledger
    reply = render(client, view="mean", mechanism="paper")
    assert "Not differentially private as labelled" in reply.panel_text
    status = ledger.status(role=Role.OWNER, dataset_id="pirads", user="test-owner")
    calibration = calibration_epsilon(services_of(explore_app).registry.get("pirads"))
    assert status.role.spent == 0.0                                   # outside sound totals
    assert status.dataset.loss == pytest.approx(calibration)        # only the calibration
    row = ledger.releases(limit=1)[0]
    assert not row.dp and row.charged == 0.0
    assert status.dataset.unsound_loss == row.epsilon > 1.0          # lower bound, kept apart
    spent_text = _panel(reply, ids.PANEL_SPENT)
    assert spent_text.startswith(f"{fmt(0.0)} — not differentially private")
    assert f"at least ε = {fmt(row.epsilon)}" in spent_text
    assert check_invariants(ledger) == []


def test_an_owner_budget_of_half_never_blocks_a_collaborator(tmp_path):
    app, services = _app(tmp_path, {"owner": 0.5, "collaborator": 10}, Role.COLLABORATOR)
    client = app.server.test_client()
    for view, group in (("histogram", "PIRADS score"), ("mean", "PIRADS score"),
                        ("median", "Prostatitis"), ("variance", "none")):
        reply = render(client, role="collaborator", view=view, group=group)
        assert reply.figures(), reply.message
    assert services.ledger.budget(role=Role.OWNER, dataset_id="pirads").spent == 0.0
    services.identity.set(Role.OWNER)      # the owner's own budget still binds the owner
    refused = render(client, view="histogram", group="PIRADS score")
    assert "budget exhausted for the owner role" in refused.message.lower()


def test_a_second_user_opening_a_cached_view_is_logged_as_a_delivery(client, session,
                                                                     explore_app):
    from app import services_of

    ledger = services_of(explore_app).ledger
    session.set(Role.COLLABORATOR, "carl")
    first = render(client, role="collaborator", view="mean")
    session.set(Role.COLLABORATOR, "cleo")
    second = render(client, role="collaborator", view="mean")
    assert "nothing charged" in second.panel_text
    assert second.figures()[0]["data"] == first.figures()[0]["data"]
    release_id = ledger.releases(user="carl", limit=1)[0].id
    assert [(u, r, i) for _, u, r, i in ledger.deliveries()] == [
        ("cleo", "collaborator", release_id)]


# -- SQL transactions per release --------------------------------------------------------------

@pytest.fixture(params=BACKENDS)
def counted(request, tmp_path):
    """(service, counter) on a fresh ledger; counter() = transactions begun since last call."""
    gen = backend_for(request.param, tmp_path)
    url, schema = next(gen)
    ledger = Ledger(url, BudgetPolicy(), schema=schema)
    begun = [0]
    event.listen(ledger.db.base_engine, "begin", lambda _conn: begun.__setitem__(0, begun[0] + 1))
    registry = DatasetRegistry(tmp_path / "datasets")
    service = ReleaseService(registry, ledger, rng_factory=new_rng_factory(3))

    def counter() -> int:
        n, begun[0] = begun[0], 0
        return n

    yield service, counter
    ledger.close()
    gen.close()


def test_a_release_takes_at_most_two_transactions_and_a_cached_one_exactly_one(counted):
    service, transactions = counted
    owner, olivia = Identity("olga", Role.OWNER, True), Identity("olivia", Role.OWNER, True)
    carl = Identity("carl", Role.COLLABORATOR, True)
    grouped = ViewRequest("pirads", "histogram", "Age", "PIRADS score", "sound", Role.OWNER)
    service.calibrate(service.registry.get("pirads"))   # once per dataset version
    service.prepare(owner, grouped)                      # the grouping's sizes, priced
    transactions()
    first = service.answer(owner, grouped)
    assert not first.cached and transactions() <= 2
    assert service.answer(owner, grouped).cached and transactions() == 1
    assert service.answer(olivia, grouped).cached and transactions() == 1   # delivery logged
    as_collab = ViewRequest("pirads", "histogram", "Age", "PIRADS score", "sound",
                            Role.COLLABORATOR)
    assert not service.answer(carl, as_collab).cached and transactions() <= 2  # refined tier
    for view, group in (("mean", None), ("median", "Prostatitis"), ("variance", "BPH")):
        req = ViewRequest("pirads", view, "Age", group, "sound", Role.OWNER)
        service.prepare(owner, req)
        transactions()
        shared = 2 if view == "median" else 0   # the box plot's plan: read, then stored
        assert not service.answer(owner, req).cached and transactions() <= 2 + shared
        assert service.answer(owner, req).cached and transactions() == 1
    assert [u for _, u, _, _ in service.ledger.deliveries()] == ["olga", "olivia"] + ["olga"] * 3
    assert check_invariants(service.ledger) == []


def quote_of(service, identity, req, *, dataset):
    """What answering ``req`` would cost now, as the session asks the ledger (no row read)."""
    service.calibrate(dataset)
    return service.ledger.quote(service.plan(identity, req, dataset=dataset),
                                user=identity.user)


def quotes(service, identity, reqs, *, dataset):
    """``quote_of`` each request from one ledger read; an unplannable one is its error."""
    service.calibrate(dataset)
    plans: list = []
    for req in reqs:
        try:
            plans.append(service.plan(identity, req, dataset=dataset))
        except Exception as exc:    # noqa: BLE001 - handed back like the ledger's
            plans.append(exc)
    got = iter(service.ledger.quotes([p for p in plans if not isinstance(p, Exception)],
                                     user=identity.user))
    return [p if isinstance(p, Exception) else next(got) for p in plans]


def status(service, identity, dataset_id):
    """Role spent / limit, the user's, the dataset's loss / cap (one ledger read)."""
    return service.ledger.status(role=identity.role, dataset_id=dataset_id,
                                 user=identity.user)


def test_many_quotes_take_one_transaction_and_equal_single_quotes(counted):
    service, transactions = counted
    ds = service.registry.get("pirads")
    carl = Identity("carl", Role.COLLABORATOR, True)
    mean = ViewRequest("pirads", "mean", "Age", "PIRADS score", "sound", Role.COLLABORATOR)
    service.prepare(carl, mean)
    service.answer(carl, mean)
    reqs = [ViewRequest("pirads", v, "Age", g, "sound", Role.COLLABORATOR)
            for v, g in (("mean", "PIRADS score"), ("histogram", "PIRADS score"),
                         ("median", "Prostatitis"), ("median", "Gleason score"))]
    bad = ViewRequest("pirads", "mean", "Prostatitis", None, "sound", Role.COLLABORATOR)
    transactions()
    many = quotes(service, carl, [*reqs, bad], dataset=ds)
    assert transactions() == 1
    single = [quote_of(service, carl, r, dataset=ds) for r in reqs]
    assert [(q.cached, q.cost, q.missing_inputs, q.refusal) for q in many[:4]] == [
        (q.cached, q.cost, q.missing_inputs, q.refusal) for q in single]
    assert many[0].cached and many[1].cost > 0 and many[2].missing_inputs
    assert isinstance(many[4], DPError) and "numeric" in str(many[4])
    assert [r.query_key for r in service.ledger.releases(role=Role.COLLABORATOR)] == [
        mean.query_key(ds.schema) + "|as=collaborator", "internal:sizes:PIRADS score|as="
        "collaborator"]
    assert service.ledger.releases(role=Role.OWNER) == []


class _NoRows:
    """A dataset whose public metadata can be read but whose rows cannot."""

    def __init__(self, ds) -> None:
        self.id, self.title, self.version, self.schema = ds.id, ds.title, ds.version, ds.schema

    @property
    def frame(self):
        raise AssertionError("a quote must not read a private row")


def test_a_view_quote_reads_no_row_spends_nothing_and_matches_the_charge(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    service = ReleaseService(DatasetRegistry(tmp_path / "datasets"), ledger,
                             rng_factory=new_rng_factory(5))
    ds = service.registry.get("pirads")
    carl = Identity("carl", Role.COLLABORATOR, True)
    req = ViewRequest("pirads", "histogram", "Age", "PIRADS score", "sound", Role.COLLABORATOR)
    service.calibrate(ds)               # the reserved calibration, once per version
    first = quote_of(service, carl, req, dataset=_NoRows(ds))
    # the grouping's DP sizes are not public yet: pricing them is what the quote names
    assert first.plan is None and first.missing_inputs == ("sizes:PIRADS score",)
    assert first.cost == pytest.approx(0.25)
    service.prepare(carl, req, dataset=ds)
    quote = quote_of(service, carl, req, dataset=_NoRows(ds))
    before = status(service, carl, "pirads")
    assert quote.plan is not None and quote.refusal is None
    assert quote.status == before and len(ledger.releases()) == 1
    ans = service.answer(carl, req, dataset=ds)
    assert ans.epsilon_charged == quote.cost == ans.epsilon
    assert ans.budget_spent == pytest.approx(before.role.spent + quote.cost)
    assert ans.dataset_loss == pytest.approx(before.dataset.loss + quote.loss_growth)
    assert service.public_size(ds) > 0                   # the calibration's n̂ of all records
    assert ans.n_estimate > 0
    assert quote_of(service, carl, req, dataset=_NoRows(ds)).cached
    ledger.close()


def test_the_panel_shows_a_per_user_limit_when_one_is_set(tmp_path):
    app, services = _app(tmp_path, {"per_user": {"collaborator": 3}}, Role.COLLABORATOR,
                         "carl")
    reply = render(app.server.test_client(), role="collaborator", view="mean")
    spent = services.ledger.status(role=Role.COLLABORATOR, dataset_id="pirads", user="carl")
    assert (f"Shared by all collaborators: ε {fmt(spent.role.spent)} of 8 used; you used "
            f"{fmt(spent.user.spent)} of your limit 3") in reply.panel_text
    assert json.dumps(reply.prop(ids.EX_MESSAGE)) == "null"
