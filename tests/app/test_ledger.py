"""Privacy ledger on real SQLite and real PostgreSQL: the door, cache, budgets, reports."""

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

import services.ledger.db as ledger_db
from dp_engine.errors import BudgetExceededError
from services.identity.roles import Role
from services.ledger.audit import check_invariants
from services.ledger.policy import BudgetPolicy
from services.ledger.store import Ledger
from tests.app.test_concurrency_support import answer, toy_plan, toy_release

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


def charge(led: Ledger, key: str = "q1", *, role: Role = Role.COLLABORATOR, eps=0.5,
           dataset: str = "ds", version: str = "v1", tier: int | None = None,
           user: str = "alice", answer_: dict | None = None, nestable: bool = False,
           dp: bool = True, compute=toy_release):
    """One request through the door with a toy plan (ε per tier, or one ε for all)."""
    plan = toy_plan(key, role=role, eps=eps, dataset=dataset, version=version, tier=tier,
                    nestable=nestable, dp=dp)
    return led.release(plan, compute, answer(answer_ or {"value": 41.5}), user=user)


def spent(led: Ledger, role: Role = Role.COLLABORATOR, dataset: str = "ds") -> float:
    return led.budget(role=role, dataset_id=dataset).spent


def test_release_is_stored_and_an_identical_request_is_served_uncharged(make_ledger):
    led = make_ledger()
    first = charge(led, answer_={"value": 12.25, "ci": [10.0, 14.5]})
    assert not first.cached and first.charged == 0.5 and first.loss_added == 0.5
    again = charge(led, answer_={"value": -999.0}, eps=0.7)  # would be a new draw: not made
    assert again.cached and again.release_id == first.release_id and again.charged == 0.0
    assert again.answer == {"value": 12.25, "ci": [10.0, 14.5]}
    assert spent(led) == 0.5 and again.status.role.spent == 0.5
    assert [(r.epsilon, r.dp) for r in led.releases()] == [(0.5, True)]
    stored = led.lookup(toy_plan("q1").key)
    assert stored.id == first.release_id and stored.answer == again.answer
    assert led.lookup(toy_plan("q1", role=Role.THIRD_PARTY).key) is None   # per paying role
    assert led.dataset_loss("ds") == 0.5 and check_invariants(led) == []


def test_cache_hits_are_logged_as_deliveries_to_whoever_received_them(make_ledger):
    led = make_ledger()
    first = charge(led, "a", user="alice", eps=0.5)
    assert charge(led, "a", user="bob", eps=0.5).cached
    assert charge(led, "a", user="carol").release_id == first.release_id
    led.log_delivery(first.release_id, user="dan", role=Role.COLLABORATOR, channel="publish")
    log = led.deliveries()
    assert [(u, r, i) for _, u, r, i in log] == [("bob", "collaborator", first.release_id),
                                                 ("carol", "collaborator", first.release_id),
                                                 ("dan", "collaborator", first.release_id)]
    assert [u for _, u, _, _ in led.deliveries(user="carol", dataset_id="ds")] == ["carol"]
    assert led.deliveries(dataset_id="other") == []
    totals = led.totals().set_index("user")
    assert totals.loc["alice", ["releases", "cache_hits"]].tolist() == [1, 0]
    assert totals.loc["bob", ["releases", "cache_hits"]].tolist() == [0, 1]
    assert totals.loc["carol", "epsilon"] == 0.0  # nothing charged for reuse
    assert spent(led) == 0.5


def test_served_copies_are_per_paying_role_and_tiers_are_shared(make_ledger):
    led = make_ledger()
    owner = charge(led, role=Role.OWNER, tier=1, eps=0.4)   # the owner previewing tier 1
    assert owner.loss_added == 0.0           # the owner's own answer is not a disclosure
    collab = charge(led, role=Role.COLLABORATOR, eps=0.4, answer_={"value": 2.0})
    assert not collab.cached and collab.release_id != owner.release_id
    assert collab.loss_added == 0.4          # tier 1 reaches another role: now it counts
    assert collab.charged == 0.4 and spent(led) == 0.4 and spent(led, Role.OWNER) == 0.4
    other_version = charge(led, version="v2", eps=0.4)
    assert not other_version.cached and other_version.loss_added == 0.4
    assert led.dataset_loss("ds") == 0.8 and check_invariants(led) == []


def test_tiers_are_drawn_lazily_and_the_chain_costs_its_least_noisy_disclosed_tier(make_ledger):
    """A third party asks first: only its own tier is drawn (never the owner's). The
    collaborator's tier then joins the chain and the dataset's loss grows by the difference,
    so the pair costs what the less noisy tier costs (gradual release), not the sum."""
    led = make_ledger()
    eps = {0: 0.4, 1: 0.2, 2: 0.1}
    third = charge(led, "n", role=Role.THIRD_PARTY, eps=eps, nestable=True)
    assert third.charged == 0.1 and third.loss_added == pytest.approx(0.1)
    assert [t.tier for t in led.internal_releases()] == [2]
    collab = charge(led, "n", eps=eps, nestable=True)
    assert collab.charged == 0.2 and collab.loss_added == pytest.approx(0.1)
    owner = charge(led, "n", role=Role.OWNER, eps=eps, nestable=True)
    assert owner.charged == 0.4 and owner.loss_added == 0.0      # not a disclosure
    tiers = {t.tier: (t.drawn, t.dataset_loss, t.disclosed_at is not None)
             for t in led.internal_releases()}
    assert tiers == {2: ("fresh", pytest.approx(0.1), True),
                     1: ("sharpened", pytest.approx(0.1), True),
                     0: ("sharpened", 0.0, False)}
    box = charge(led, "box", role=Role.THIRD_PARTY, eps=eps)  # not nestable: its own draw
    assert box.loss_added == 0.1
    assert led.dataset_loss("ds") == pytest.approx(0.3) and check_invariants(led) == []


def test_exceeding_the_budget_refuses_with_spent_and_remaining_and_records_nothing(make_ledger):
    led = make_ledger()
    charge(led, "a", role=Role.THIRD_PARTY, eps=0.75, tier=2)
    with pytest.raises(BudgetExceededError) as err:
        charge(led, "b", role=Role.THIRD_PARTY, eps=0.5, tier=2)
    msg = str(err.value)
    assert "spent 0.75 of 1, 0.25 left" in msg and "Nothing was charged" in msg
    status = led.budget(role=Role.THIRD_PARTY, dataset_id="ds")
    assert (status.spent, status.remaining, status.limit) == (0.75, 0.25, 1.0)
    assert [r.query_key for r in led.releases()] == ["a|as=third_party"]
    assert len(led.internal_releases()) == 1 and led.dataset_loss("ds") == 0.75
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
    assert led.dataset_loss("ds") == 0.0     # the owner's own answers are not disclosures
    owner = led.budget(role=Role.OWNER, dataset_id="ds")
    assert owner.limit is None and owner.remaining is None and owner.spent == 300.0
    assert led.budget(role=Role.COLLABORATOR, dataset_id="ds2").remaining == 0.0
    assert led.budget(role=Role.COLLABORATOR, dataset_id="never").spent == 0.0
    assert {(b.role, b.dataset_id) for b in led.budgets()} == {
        ("collaborator", "ds1"), ("collaborator", "ds2"), ("third_party", "ds1"), ("owner", "ds")}


def test_dataset_loss_is_a_per_dataset_total(make_ledger):
    led = make_ledger()
    eps = {0: 0.4, 1: 0.2, 2: 0.1}
    charge(led, "a", role=Role.OWNER, eps=eps, nestable=True)
    charge(led, "a", eps=eps, nestable=True)  # tier 1 refined from the owner's, disclosed
    charge(led, "b", eps=0.3, dataset="other", version="o1")
    assert led.dataset_loss("ds") == pytest.approx(0.2)
    assert led.dataset_loss("other") == pytest.approx(0.3)
    assert led.dataset_loss("unknown") == 0.0


def test_cache_and_budgets_survive_a_restart(make_ledger):
    led = make_ledger()
    stored = charge(led, "a", eps=1.5, answer_={"value": np.float64(3.5), "n": np.int64(7),
                                                "bins": np.array([1, 2])})
    led.close()
    reopened = make_ledger()
    hit = charge(reopened, "a", eps=1.5, user="bob")
    assert hit.cached and hit.release_id == stored.release_id
    assert hit.answer == {"value": 3.5, "n": 7, "bins": [1, 2]}
    assert spent(reopened) == 1.5


@pytest.mark.parametrize("bad", [float("nan"), -0.1, float("inf"), "abc"])
def test_invalid_epsilon_is_refused_and_nothing_recorded(make_ledger, bad):
    led = make_ledger()
    with pytest.raises(ValueError):
        charge(led, "x", eps=bad)
    assert led.releases() == []


def test_budget_renews_after_the_period(make_ledger, monkeypatch):
    led = make_ledger(BudgetPolicy.from_mapping({"third_party": 1, "renewal_days": 7}))
    t0 = ledger_db.now()
    monkeypatch.setattr(ledger_db, "now", lambda: t0)
    charge(led, "a", role=Role.THIRD_PARTY, tier=2, eps=1.0)
    with pytest.raises(BudgetExceededError, match="renews on"):
        charge(led, "b", role=Role.THIRD_PARTY, tier=2, eps=0.5)
    monkeypatch.setattr(ledger_db, "now", lambda: t0 + timedelta(days=7, seconds=1))
    status = led.budget(role=Role.THIRD_PARTY, dataset_id="ds")
    assert status.spent == 0.0 and status.renews_at == t0 + timedelta(days=14)
    charge(led, "b", role=Role.THIRD_PARTY, tier=2, eps=0.5)
    assert led.budget(role=Role.THIRD_PARTY, dataset_id="ds").spent == 0.5
    assert led.dataset_loss("ds") == 1.5       # the dataset's loss never renews
    assert check_invariants(led) == []


def test_filters_totals_and_csv_export(make_ledger):
    led = make_ledger()
    charge(led, "a", user="alice", eps=0.5)
    charge(led, "b", user="alice", eps=0.25, dataset="d2", version="x")
    charge(led, "c", user="=HYPERLINK(1)", eps=0.125, role=Role.THIRD_PARTY, tier=2)
    keys = [r.query_key.split("|")[0] for r in led.releases()]
    assert keys == ["c", "b", "a"]  # newest first
    assert [r.query_key[0] for r in led.releases(user="alice")] == ["b", "a"]
    assert [r.query_key[0] for r in led.releases(dataset_id="ds")] == ["c", "a"]
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
    assert [r["query_key"][0] for r in rows] == ["a", "b", "c"]
    assert rows[2]["user"] == "'=HYPERLINK(1)"  # spreadsheet formula neutralized
    assert float(rows[0]["epsilon"]) == 0.5 and rows[0]["answer"] == '{"value": 41.5}'
    assert rows[0]["dp"] == "yes"
    only = list(csv.DictReader(io.StringIO(led.export_csv(user="alice", dataset_id="d2"))))
    assert [r["query_key"][0] for r in only] == ["b"]


def test_schema_name_is_validated():
    with pytest.raises(ValueError, match="schema"):
        Ledger("sqlite:///:memory:", schema="x")
    with pytest.raises(ValueError, match="SQLite and PostgreSQL"):
        Ledger("mysql://u@h/db")


# -- policy ------------------------------------------------------------------------------------

def test_policy_defaults_and_overrides():
    p = BudgetPolicy()
    assert (p.limit(Role.OWNER), p.limit("collaborator"), p.limit(Role.THIRD_PARTY)) == \
        (None, 8.0, 5.0)                      # why: docs/accounting.md
    q = BudgetPolicy.from_mapping({"third-party": "0.5", "owner": 20, "renewal_days": "30"})
    assert (q.limit(Role.OWNER), q.limit(Role.COLLABORATOR), q.limit(Role.THIRD_PARTY)) == \
        (20.0, 8.0, 0.5)
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
    assert check_invariants(led) == []
    led.close()


def _schema_2_ledger(url: str, schema: str | None) -> None:
    """A ledger as version 2 wrote it: internal tiers and the calibration count stored as
    releases of a "system" user charged to the owner, paper mode counted as DP."""
    from datetime import UTC, datetime

    md = sa.MetaData()
    cols = [sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("created_at", sa.DateTime(timezone=True)), sa.Column("user_name", sa.String),
            sa.Column("role", sa.String), sa.Column("dataset_id", sa.String),
            sa.Column("dataset_version", sa.String), sa.Column("query_key", sa.Text),
            sa.Column("tier", sa.Integer), sa.Column("mechanism", sa.String),
            sa.Column("epsilon", sa.Float), sa.Column("dataset_loss", sa.Float),
            sa.Column("answer_json", sa.Text)]
    rel = sa.Table("ledger_releases", md, *cols,
                   sa.UniqueConstraint("dataset_version", "query_key", "tier"))
    bud = sa.Table("ledger_budgets", md, sa.Column("role", sa.String, primary_key=True),
                   sa.Column("dataset_id", sa.String, primary_key=True),
                   sa.Column("first_charge_at", sa.DateTime(timezone=True)),
                   sa.Column("period_start", sa.DateTime(timezone=True)),
                   sa.Column("spent", sa.Float))
    meta = sa.Table("ledger_meta", md, sa.Column("key", sa.String, primary_key=True),
                    sa.Column("value", sa.String))
    sa.Table("ledger_deliveries", md, sa.Column("id", sa.Integer, primary_key=True),
             sa.Column("release_id", sa.Integer), sa.Column("delivered_at", sa.DateTime),
             sa.Column("user_name", sa.String), sa.Column("role", sa.String))
    engine = sa.create_engine(url)
    if schema:
        engine = engine.execution_options(schema_translate_map={None: schema})
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    system = "system (materialized tiers)"
    rows = [  # user, role, key, tier, mechanism, ε, dataset loss
        (system, "owner", '{"query":"count"}', 0, "discrete Laplace", 0.1, 0.1),
        (system, "owner", "q|internal", 0, "discrete Laplace", 0.4, 0.4),
        (system, "owner", "q|internal", 1, "discrete Laplace", 0.2, 0.0),
        ("olga", "owner", "q|as=owner", 0, "discrete Laplace", 0.4, 0.0),
        ("carl", "collaborator", "q|as=collaborator", 1, "discrete Laplace", 0.2, 0.0),
        (system, "owner", "p|internal", 0, "PyDPLib per-record Laplace", 848.0, 848.0),
        ("olga", "owner", "p|as=owner", 0, "PyDPLib per-record Laplace (paper mode)", 848.0,
         0.0),
    ]
    with engine.begin() as conn:
        if schema:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        md.create_all(conn)
        conn.execute(meta.insert().values(key="schema_version", value="2"))
        for user, role, key, tier, mech, eps, loss in rows:
            conn.execute(rel.insert().values(
                created_at=t0, user_name=user, role=role, dataset_id="ds", dataset_version="v1",
                query_key=key, tier=tier, mechanism=mech, epsilon=eps, dataset_loss=loss,
                answer_json='{"value": 1}'))
        for role, total in (("owner", 0.1 + 0.4 + 0.2 + 0.4 + 848.0 + 848.0),
                            ("collaborator", 0.2)):
            conn.execute(bud.insert().values(role=role, dataset_id="ds", first_charge_at=t0,
                                             period_start=t0, spent=total))
    engine.dispose()


def test_a_schema_2_ledger_is_migrated_so_its_books_add_up(backend):
    url, schema = backend
    _schema_2_ledger(url, schema)
    led = Ledger(url, schema=schema)
    assert spent(led, Role.OWNER) == pytest.approx(0.4)       # its own view only, sound mode
    assert spent(led) == pytest.approx(0.2)
    assert led.dataset_loss("ds") == pytest.approx(0.5)       # the count and tier 0, once
    assert led.dataset_status("ds").unsound_loss == 848.0     # paper mode, kept apart
    assert [r.user for r in led.releases()] == ["olga", "carl", "olga"]
    assert [r.dp for r in led.releases()] == [False, True, True]
    assert all(t.query_key.startswith("legacy:") for t in led.internal_releases())
    assert check_invariants(led) == []
    again = charge(led, "q", eps=0.2, user="cleo")            # the stored answer, free
    assert again.cached and again.answer == {"value": 1}
    led.close()
    engine = sa.create_engine(url)
    table = f'"{schema}".ledger_meta' if schema else "ledger_meta"
    with engine.begin() as conn:
        assert conn.execute(sa.text(f"SELECT value FROM {table}")).scalar_one() == "4"
        conn.execute(sa.text(f"UPDATE {table} SET value = '99'"))
    engine.dispose()
    with pytest.raises(RuntimeError, match="newer version"):
        Ledger(url, schema=schema)
