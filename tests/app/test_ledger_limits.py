"""Limits inside the one transaction (per-user limits, the dataset cap), internal releases,
quotes that compute nothing, concurrent tier races, and the books' invariants."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from dp_engine.errors import BudgetExceededError
from services.identity.roles import Role
from services.ledger.audit import check_invariants
from services.ledger.models import budgets, datasets
from services.ledger.plan import InternalSpec, ReleaseKey, ReleasePlan
from services.ledger.policy import DEFAULT_DATASET_CAP, BudgetPolicy
from tests.app.test_concurrency_support import answer, toy_plan, toy_release
from tests.app.test_ledger import charge, spent


def test_per_user_limits_are_off_by_default_and_bind_inside_the_role_budget(make_ledger):
    assert BudgetPolicy().user_limit(Role.COLLABORATOR) is None
    led = make_ledger(BudgetPolicy.from_mapping({"collaborator": 1.0,
                                                  "per_user": {"collaborator": 0.5}}))
    charge(led, "a", eps=0.25, user="carl")
    charge(led, "b", eps=0.25, user="carl")
    with pytest.raises(BudgetExceededError, match="user 'carl'.*spent 0.5 of 0.5, 0 left"):
        charge(led, "c", eps=0.25, user="carl")
    assert charge(led, "a", user="carl").cached          # what carl has seen stays free
    ok = charge(led, "c", eps=0.25, user="cleo")          # the role's budget has room left
    assert ok.status.user.spent == 0.25 and ok.status.role.spent == 0.75
    status = led.status(role=Role.COLLABORATOR, dataset_id="ds", user="carl")
    assert (status.user.spent, status.user.limit, status.user.remaining) == (0.5, 0.5, 0.0)
    assert (status.role.spent, status.role.limit) == (0.75, 1.0)
    assert check_invariants(led) == []


def test_the_dataset_cap_refuses_non_owners_and_never_the_owner(make_ledger):
    assert DEFAULT_DATASET_CAP is not None and DEFAULT_DATASET_CAP > 6.0  # above role budgets
    led = make_ledger(BudgetPolicy.from_mapping({"dataset_cap": 1.0}))
    nested = {0: 0.5, 1: 0.5, 2: 0.5}
    charge(led, "n", eps=nested, nestable=True)            # tier 1 disclosed: loss 0.5
    charge(led, "a", eps=0.25)
    with pytest.raises(BudgetExceededError, match="dataset 'ds'.*spent 0.75 of 1"):
        charge(led, "b", eps=0.5)
    assert spent(led) == 0.75                              # refused: nothing charged
    owner = charge(led, "b", role=Role.OWNER, eps=0.5)     # the owner passes the cap,
    assert owner.status.dataset.loss == 0.75               # and its own view is no disclosure
    charge(led, "c", eps=0.25)                             # the cap is now used up
    # a tier already disclosed adds no loss, so it fits even with the cap used up
    third = charge(led, "n", role=Role.THIRD_PARTY, eps=nested, nestable=True)
    assert third.loss_added == 0.0 and third.charged == 0.5
    # the owner's own tier still counts the moment it reaches another role
    charge(led, "m", role=Role.OWNER, eps=nested, nestable=True)
    with pytest.raises(BudgetExceededError, match="dataset 'ds'"):
        charge(led, "m", eps=nested, nestable=True)
    assert check_invariants(led) == []


def _size(calls: list[int], priced: bool = False) -> InternalSpec:
    def compute(eps, rng):
        calls.append(1)
        return toy_release(eps, value=900)

    return InternalSpec("size", 0.1, "toy count", compute, priced=priced)


class _Sized:
    """A plan source built from a calibration release (as the views are from n̂)."""

    def __init__(self, key: str, calls: list[int], role: Role = Role.COLLABORATOR,
                 priced: bool = False) -> None:
        self.key = ReleaseKey("ds", "v1", key, role.noise_factor, role)
        self.inputs = (_size(calls, priced),)
        self.built_with: float | None = None

    def build(self, inputs) -> ReleasePlan:
        self.built_with = float(inputs["size"].value)
        return ReleasePlan(self.key, dict.fromkeys(range(3), 0.25), False, "toy")


def test_the_reserved_calibration_is_drawn_once_per_version_and_charged_to_no_role(make_ledger):
    led = make_ledger()
    calls: list[int] = []
    assert led.calibrate([_size(calls)], dataset_id="ds", dataset_version="v1") == 0.1
    assert led.calibrate([_size(calls)], dataset_id="ds", dataset_version="v1") == 0.0
    first = led.release(_Sized("a", calls), toy_release, answer({"v": 1}), user="carl")
    assert first.loss_added == pytest.approx(0.25) and first.charged == 0.25
    second = _Sized("b", calls)
    led.release(second, toy_release, answer({"v": 2}), user="carl")
    assert len(calls) == 1 and second.built_with == 900.0   # looked up, not drawn again
    assert float(led.internal("v1", "size").value) == 900.0 and led.internal("v2", "size") is None
    assert spent(led) == 0.5 and led.dataset_loss("ds") == pytest.approx(0.6)
    assert check_invariants(led) == []


def test_a_groupings_sizes_are_priced_by_the_request_that_needs_them(make_ledger):
    """Whoever causes a release pays for it: the first request grouped by a column pays for
    its DP sizes (and only when it asks to), which then serve everyone free."""
    from services.ledger.door import PricingNeeded

    led = make_ledger()
    calls: list[int] = []
    with pytest.raises(PricingNeeded, match="ε 0.1"):
        led.release(_Sized("a", calls, priced=True), toy_release, answer({}), user="carl")
    assert calls == [] and led.releases() == []
    quote = led.quote(_Sized("a", calls, priced=True), user="carl")
    assert quote.plan is None and quote.cost == pytest.approx(0.1)
    first = led.release(_Sized("a", calls, priced=True), toy_release, answer({}), user="carl",
                        price=True)
    assert first.charged == pytest.approx(0.35) and first.loss_added == pytest.approx(0.35)
    sizes = [r for r in led.releases() if r.query_key.startswith("internal:size")]
    assert [(r.user, r.epsilon) for r in sizes] == [("carl", 0.1)]   # served to the payer
    tina = led.release(_Sized("b", calls, Role.THIRD_PARTY, priced=True), toy_release,
                       answer({}), user="tina")
    assert tina.charged == 0.25 and len(calls) == 1                  # public from then on
    assert check_invariants(led) == []


def test_a_refusal_records_nothing_not_even_the_sizes_it_would_price(make_ledger):
    led = make_ledger(BudgetPolicy({Role.THIRD_PARTY: 0.2}))
    calls: list[int] = []
    with pytest.raises(BudgetExceededError):
        led.release(_Sized("a", calls, Role.THIRD_PARTY, priced=True), toy_release, answer({}),
                    user="tina", price=True)
    assert led.releases() == [] and spent(led, Role.THIRD_PARTY) == 0.0
    assert led.internal("v1", "size") is None and led.dataset_loss("ds") == 0.0
    assert check_invariants(led) == []


def test_a_quote_computes_and_spends_nothing(make_ledger):
    led = make_ledger(BudgetPolicy({Role.COLLABORATOR: 0.4}))
    calls: list[int] = []
    missing = led.quote(_Sized("a", calls), user="carl")
    assert missing.plan is None and missing.missing_inputs == ("size",)
    assert missing.loss_growth == pytest.approx(0.1) and calls == []
    led.release(_Sized("a", calls), toy_release, answer({}), user="carl")
    fresh = led.quote(_Sized("b", calls), user="carl")
    assert fresh.plan is not None and fresh.cost == 0.25 and fresh.loss_growth == 0.25
    assert "spent 0.25 of 0.4" in fresh.refusal                 # it would not fit
    assert led.quote(_Sized("a", calls), user="cleo").cached
    assert len(calls) == 1 and len(led.releases()) == 1 and led.deliveries() == []


def test_a_tier_stored_concurrently_is_never_overwritten_and_the_answer_derives_from_it(
        make_ledger):
    """Request A draws tier 1 while request B (the owner) stores tier 0 of the same query:
    A's draw is discarded before anything derived from it is shown, and A's tier joins the
    chain below B's (refined from it, no second draw from the data)."""
    led = make_ledger()
    eps = {0: 0.5, 1: 0.25, 2: 0.125}
    draws: list[str] = []

    def compute_a(e, rng):
        draws.append("a")
        if len(draws) == 1:   # B lands while A is computing
            led.release(toy_plan("q", role=Role.OWNER, eps=eps, nestable=True, dataset="ds"),
                        lambda e2, r2: toy_release(e2, value=7.0), answer({"by": "b"}),
                        user="olga")
        return toy_release(e, value=-1.0)

    served = led.release(toy_plan("q", eps=eps, nestable=True, dataset="ds"), compute_a,
                         lambda plan, rel: {"value": float(rel.value)}, user="carl")
    assert served.answer == {"value": 7.0} and served.loss_added == 0.25  # from B's tier 0
    assert draws == ["a"]                                                 # no second draw
    tiers = sorted((t.tier, t.dataset_loss, t.drawn) for t in led.internal_releases())
    assert tiers == [(0, 0.0, "fresh"), (1, 0.25, "refined")]
    assert led.dataset_loss("ds") == 0.25 and check_invariants(led) == []


def test_the_invariant_check_finds_books_that_do_not_add_up(make_ledger):
    led = make_ledger()
    charge(led, "a", eps=0.5)
    assert check_invariants(led) == []
    with led.db.tx(write=True) as conn:
        conn.execute(sa.update(budgets).values(spent=budgets.c.spent + 1))
        conn.execute(sa.update(datasets).values(loss=0.0))
    problems = check_invariants(led)
    assert any("budget collaborator/ds" in p for p in problems)
    assert any("dataset ds" in p for p in problems)


def test_plans_refuse_inconsistent_epsilons_and_price_groups_by_their_maximum():
    key = ReleaseKey("ds", "v1", "q", 1, Role.COLLABORATOR)
    with pytest.raises(ValueError, match="ε0 ≥ ε1"):
        ReleasePlan(key, {0: 0.1, 1: 0.2, 2: 0.05}, True, "toy")
    with pytest.raises(ValueError, match="finite"):
        ReleasePlan(key, {1: float("nan")}, False, "toy")
    per_group = ReleasePlan(key, {0: (0.4, 0.8), 1: (0.2, 0.3), 2: (0.1, 0.1)}, True, "toy")
    assert per_group.cost == 0.3 and per_group.discloses()   # parallel composition: the max
    # a group withheld at one tier (ε 0) may be shown at another: nesting holds where shown
    ReleasePlan(key, {0: (0.0, 0.8), 1: (0.2, 0.3), 2: (0.1, 0.1)}, True, "toy")
    owner = ReleasePlan(ReleaseKey("ds", "v1", "q", 0, Role.OWNER), {0: 0.4}, True, "toy")
    assert not owner.discloses()                          # the owner's own view
    leaves = ReleasePlan(ReleaseKey("ds", "v1", "s", 0, Role.OWNER), {0: 0.4}, False, "toy",
                         leaves=True)
    assert leaves.discloses()                             # a table made to leave
    paper = ReleasePlan(key, dict.fromkeys(range(3)), False, "paper", dp=False)
    assert paper.cost == 0.0 and not paper.discloses()


def test_the_cap_is_checked_under_the_dataset_lock(make_ledger):
    """Two roles' requests on one dataset serialize on its row: the cap is never overrun."""
    from concurrent.futures import ThreadPoolExecutor

    led = make_ledger(BudgetPolicy.from_mapping({"dataset_cap": 2.0, "collaborator": 100,
                                                  "third_party": 100}))

    def ask(i: int) -> bool:
        role = Role.COLLABORATOR if i % 2 else Role.THIRD_PARTY
        try:
            charge(led, f"k{i}", role=role, eps=0.25, user=f"u{i}")
            return True
        except BudgetExceededError:
            return False

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ask, range(16)))
    assert results.count(True) == 8 and led.dataset_loss("ds") == 2.0
    assert check_invariants(led) == []
