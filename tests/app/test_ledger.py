"""Privacy ledger on real SQLite and real PostgreSQL: charging, cache, budgets, reports."""

from __future__ import annotations

import csv
import io
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import numpy as np
import pytest
import sqlalchemy as sa

import services.ledger.store as ledger_mod
from dp_engine.errors import BudgetExceededError, InvalidEpsilonError
from services.identity.roles import Role
from services.ledger.policy import BudgetPolicy
from services.ledger.store import Ledger

PG_URL = os.environ.get("TEST_DATABASE_URL")
PG_SKIP = "TEST_DATABASE_URL is not set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)"


def new_pg_schema() -> str:
    """A schema name unique to this test run, so parallel runs never share tables."""
    return f"ledger_t_{uuid.uuid4().hex[:16]}"


def drop_pg_schema(schema: str) -> None:
    engine = sa.create_engine(PG_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def pg_backend() -> Iterator[tuple[str, str]]:
    """(url, fresh schema) on the test PostgreSQL, dropped afterwards; skips when unset."""
    if not PG_URL:
        pytest.skip(PG_SKIP)
    schema = new_pg_schema()
    try:
        yield PG_URL, schema
    finally:
        drop_pg_schema(schema)


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def backend_for(kind: str, tmp_path) -> Iterator[tuple[str, str | None]]:
    """(url, schema) of an empty ledger database: a SQLite file or a fresh PostgreSQL schema."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.sqlite'}", None
    else:
        yield from pg_backend()


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Iterator[tuple[str, str | None]]:
    yield from backend_for(request.param, tmp_path)


@pytest.fixture
def make_ledger(backend):
    opened: list[Ledger] = []

    def make(policy: BudgetPolicy | None = None) -> Ledger:
        url, schema = backend
        led = Ledger(url, policy or BudgetPolicy(), schema=schema)
        opened.append(led)
        return led

    yield make
    for led in opened:
        led.close()


def charge(led: Ledger, key: str = "q1", *, role: Role = Role.COLLABORATOR, eps: float = 0.5,
           dataset: str = "ds", version: str = "v1", tier: int = 1, user: str = "alice",
           answer: dict | None = None, loss: float = 0.0):
    return led.charge_and_record(
        user=user, role=role, dataset_id=dataset, dataset_version=version, query_key=key,
        tier=tier, mechanism="laplace", epsilon=eps, answer=answer or {"value": 41.5},
        dataset_loss=loss)


def test_release_is_stored_and_an_identical_request_is_served_uncharged(make_ledger):
    led = make_ledger()
    first = charge(led, answer={"value": 12.25, "ci": [10.0, 14.5]})
    assert not first.cached
    again = charge(led, answer={"value": -999.0}, eps=0.7)  # a recomputed twin is discarded
    assert again.cached and again.id == first.id
    assert again.answer == {"value": 12.25, "ci": [10.0, 14.5]}
    assert led.budget(role=Role.COLLABORATOR, dataset_id="ds").spent == pytest.approx(0.5)
    hit = led.cached(dataset_version="v1", query_key="q1", tier=1)
    assert hit is not None and hit.cached and hit.epsilon == 0.5
    assert len(led.releases()) == 1


def test_cache_hits_are_logged_as_deliveries_to_whoever_received_them(make_ledger):
    led = make_ledger()
    first = charge(led, "a", user="alice", eps=0.5)
    assert charge(led, "a", user="bob", eps=0.5).cached  # a twin request
    hit = led.cached(dataset_version="v1", query_key="a", tier=1, user="carol",
                     role=Role.THIRD_PARTY)
    assert hit.id == first.id
    led.cached(dataset_version="v1", query_key="a", tier=1)  # anonymous look-up: not logged
    assert led.cached(dataset_version="v1", query_key="zzz", tier=1, user="dan") is None
    log = led.deliveries()
    assert [(u, r, i) for _, u, r, i in log] == [("bob", "collaborator", first.id),
                                                 ("carol", "third_party", first.id)]
    assert [u for _, u, _, _ in led.deliveries(user="carol", dataset_id="ds")] == ["carol"]
    assert led.deliveries(dataset_id="other") == []
    totals = led.totals().set_index("user")
    assert totals.loc["alice", ["releases", "cache_hits"]].tolist() == [1, 0]
    assert totals.loc["bob", ["releases", "cache_hits"]].tolist() == [0, 1]
    assert totals.loc["carol", "epsilon"] == 0.0  # nothing charged for reuse
    assert led.budget(role=Role.COLLABORATOR, dataset_id="ds").spent == 0.5


def test_cache_key_includes_tier_and_version(make_ledger):
    led = make_ledger()
    charge(led, tier=0, role=Role.OWNER, answer={"value": 1.0})
    assert led.cached(dataset_version="v1", query_key="q1", tier=1) is None
    assert led.cached(dataset_version="v2", query_key="q1", tier=0) is None
    lower = charge(led, tier=2, role=Role.THIRD_PARTY, eps=0.2, answer={"value": 2.0})
    assert not lower.cached and lower.answer == {"value": 2.0}


def test_exceeding_the_budget_refuses_with_spent_and_remaining_and_records_nothing(make_ledger):
    led = make_ledger()
    charge(led, "a", role=Role.THIRD_PARTY, eps=0.75, tier=2)
    with pytest.raises(BudgetExceededError) as err:
        charge(led, "b", role=Role.THIRD_PARTY, eps=0.5, tier=2)
    msg = str(err.value)
    assert "spent 0.75 of 1, 0.25 left" in msg and "Nothing was charged" in msg
    status = led.budget(role=Role.THIRD_PARTY, dataset_id="ds")
    assert (status.spent, status.remaining, status.limit) == (0.75, 0.25, 1.0)
    assert [r.query_key for r in led.releases()] == ["a"]
    assert led.cached(dataset_version="v1", query_key="b", tier=2) is None
    # the cached answer stays available even with the budget exhausted
    assert charge(led, "a", role=Role.THIRD_PARTY, eps=0.75, tier=2).cached


def test_budget_fills_exactly_despite_float_rounding(make_ledger):
    led = make_ledger()  # collaborator limit 5.0
    for i in range(50):
        charge(led, f"k{i}", eps=0.1)
    with pytest.raises(BudgetExceededError):
        charge(led, "k50", eps=0.1)
    assert len(led.releases()) == 50
    remaining = led.budget(role=Role.COLLABORATOR, dataset_id="ds").remaining
    assert remaining == pytest.approx(0, abs=1e-9)


def test_budgets_are_per_role_and_dataset_and_owner_is_unlimited(make_ledger):
    led = make_ledger(BudgetPolicy({Role.COLLABORATOR: 1.0}))
    charge(led, "a", eps=1.0, dataset="ds1")
    charge(led, "a", eps=1.0, dataset="ds2", version="w1")
    charge(led, "b", eps=1.0, dataset="ds1", role=Role.THIRD_PARTY, tier=2)
    with pytest.raises(BudgetExceededError):
        charge(led, "c", eps=0.01, dataset="ds1")
    for i in range(3):
        charge(led, f"o{i}", eps=100.0, role=Role.OWNER, tier=0)
    owner = led.budget(role=Role.OWNER, dataset_id="ds")
    assert owner.limit is None and owner.remaining is None and owner.spent == 300.0
    assert led.budget(role=Role.COLLABORATOR, dataset_id="ds2").remaining == 0.0
    assert led.budget(role=Role.COLLABORATOR, dataset_id="never").spent == 0.0
    assert {(b.role, b.dataset_id) for b in led.budgets()} == {
        ("collaborator", "ds1"), ("collaborator", "ds2"), ("third_party", "ds1"), ("owner", "ds")}


def test_dataset_loss_is_a_per_dataset_total(make_ledger):
    led = make_ledger()
    charge(led, "a", tier=0, role=Role.OWNER, eps=0.4, loss=0.4)
    charge(led, "a", tier=1, eps=0.2, loss=0.0)  # a noisier tier of the same query adds nothing
    charge(led, "b", tier=1, eps=0.3, loss=0.3, dataset="other", version="o1")
    assert led.dataset_loss("ds") == pytest.approx(0.4)
    assert led.dataset_loss("other") == pytest.approx(0.3)
    assert led.dataset_loss("unknown") == 0.0


def test_cache_and_budgets_survive_a_restart(make_ledger):
    led = make_ledger()
    stored = charge(led, "a", eps=1.5, answer={"value": np.float64(3.5), "n": np.int64(7),
                                               "bins": np.array([1, 2])})
    led.close()
    reopened = make_ledger()
    hit = reopened.cached(dataset_version="v1", query_key="a", tier=1)
    assert hit is not None and hit.id == stored.id
    assert hit.answer == {"value": 3.5, "n": 7, "bins": [1, 2]}
    assert reopened.budget(role=Role.COLLABORATOR, dataset_id="ds").spent == 1.5


def test_invalid_epsilon_is_refused_and_nothing_recorded(make_ledger):
    led = make_ledger()
    for bad in (float("nan"), -0.1, float("inf"), "abc"):
        with pytest.raises(InvalidEpsilonError):
            charge(led, "x", eps=bad)
    assert led.releases() == []


def test_budget_renews_after_the_period(make_ledger, monkeypatch):
    led = make_ledger(BudgetPolicy(renewal_days=7))
    real_now = ledger_mod._now
    t0 = real_now()
    monkeypatch.setattr(ledger_mod, "_now", lambda: t0)
    charge(led, "a", role=Role.THIRD_PARTY, tier=2, eps=1.0)
    with pytest.raises(BudgetExceededError, match="renews on"):
        charge(led, "b", role=Role.THIRD_PARTY, tier=2, eps=0.5)
    monkeypatch.setattr(ledger_mod, "_now", lambda: t0 + timedelta(days=7, seconds=1))
    status = led.budget(role=Role.THIRD_PARTY, dataset_id="ds")
    assert status.spent == 0.0 and status.renews_at == t0 + timedelta(days=14)
    charge(led, "b", role=Role.THIRD_PARTY, tier=2, eps=0.5)
    assert led.budget(role=Role.THIRD_PARTY, dataset_id="ds").spent == 0.5


def test_filters_totals_and_csv_export(make_ledger):
    led = make_ledger()
    charge(led, "a", user="alice", eps=0.5, loss=0.5)
    charge(led, "b", user="alice", eps=0.25, dataset="d2", version="x")
    charge(led, "c", user="=HYPERLINK(1)", eps=0.125, role=Role.THIRD_PARTY, tier=2)
    assert [r.query_key for r in led.releases()] == ["c", "b", "a"]  # newest first
    assert [r.query_key for r in led.releases(user="alice")] == ["b", "a"]
    assert [r.query_key for r in led.releases(dataset_id="ds")] == ["c", "a"]
    assert len(led.releases(limit=1)) == 1
    assert led.count_releases() == 3 and led.count_releases(user="alice", dataset_id="ds") == 1
    assert led.users() == sorted(["alice", "=HYPERLINK(1)"])
    assert led.dataset_ids() == ["d2", "ds"]

    totals = led.totals().set_index(["user", "dataset_id"])
    assert totals.loc[("alice", "ds"), "releases"] == 1
    assert totals.loc[("alice", "ds"), "epsilon"] == 0.5
    assert totals.loc[("alice", "ds"), "dataset_loss"] == 0.5
    assert totals.loc[("alice", "d2"), "epsilon"] == 0.25
    assert len(totals) == 3

    rows = list(csv.DictReader(io.StringIO(led.export_csv())))
    assert [r["query_key"] for r in rows] == ["a", "b", "c"]
    assert rows[2]["user"] == "'=HYPERLINK(1)"  # spreadsheet formula neutralized
    assert float(rows[0]["epsilon"]) == 0.5 and rows[0]["answer"] == '{"value": 41.5}'
    only = list(csv.DictReader(io.StringIO(led.export_csv(user="alice", dataset_id="d2"))))
    assert [r["query_key"] for r in only] == ["b"]


def test_schema_name_is_validated():
    with pytest.raises(ValueError, match="schema"):
        Ledger("sqlite:///:memory:", schema="x")
    with pytest.raises(ValueError, match="SQLite and PostgreSQL"):
        Ledger("mysql://u@h/db")


# -- policy ------------------------------------------------------------------------------------

def test_policy_defaults_and_overrides():
    p = BudgetPolicy()
    assert (p.limit(Role.OWNER), p.limit("collaborator"), p.limit(Role.THIRD_PARTY)) == \
        (None, 5.0, 1.0)
    q = BudgetPolicy.from_mapping({"third-party": "0.5", "owner": 20, "renewal_days": "30"})
    assert (q.limit(Role.OWNER), q.limit(Role.COLLABORATOR), q.limit(Role.THIRD_PARTY)) == \
        (20.0, 5.0, 0.5)
    assert q.renewal_days == 30
    r = BudgetPolicy.from_mapping({"limits": {"collaborator": "unlimited"}})
    assert r.limit(Role.COLLABORATOR) is None and r.renewal_days is None
    assert BudgetPolicy.from_mapping(None) == BudgetPolicy()


@pytest.mark.parametrize("bad", [{"colaborator": 1}, {"owner": -1}, {"owner": "lots"},
                                 {"owner": float("nan")}, {"renewal_days": 0}])
def test_policy_refuses_bad_config(bad):
    with pytest.raises(ValueError):
        BudgetPolicy.from_mapping(bad)


def test_in_memory_ledger_is_one_database_for_every_thread():
    led = Ledger("sqlite://", BudgetPolicy({Role.COLLABORATOR: 1.0}))

    def work(i: int):
        try:
            return charge(led, f"k{i % 12}", eps=0.125, user=f"u{i}").cached
        except BudgetExceededError:
            return "refused"

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, range(40)))
    assert results.count(False) == 8 == len(led.releases())  # 1.0 / 0.125 charges fit
    assert led.budget(role=Role.COLLABORATOR, dataset_id="ds").spent == 1.0
    led.close()


def test_an_older_ledger_is_migrated_on_start(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    old = Ledger(url)
    charge(old, "a")
    old.close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # make it look like a schema-1 ledger
        conn.execute(sa.text("DROP TABLE ledger_deliveries"))
        conn.execute(sa.text("UPDATE ledger_meta SET value = '1' WHERE key = 'schema_version'"))
    new = Ledger(url)
    assert new.cached(dataset_version="v1", query_key="a", tier=1, user="bob") is not None
    assert len(new.deliveries()) == 1
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM ledger_meta")).scalar_one() == "2"
        conn.execute(sa.text("UPDATE ledger_meta SET value = '99'"))
        conn.commit()
    engine.dispose()
    new.close()
    with pytest.raises(RuntimeError, match="newer version"):
        Ledger(url)
