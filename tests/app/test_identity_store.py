"""Sessions and the login throttle in SQL, on SQLite and on PostgreSQL (TEST_DATABASE_URL)."""

from __future__ import annotations

import io
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from services import cli
from services.identity.db import IdentityDB
from services.identity.sessions import SessionPolicy, SessionStore
from services.identity.tables import sessions as sessions_table
from services.identity.tables import throttle as throttle_table
from services.identity.throttle import LoginThrottle, ThrottlePolicy, client_key
from tests.app.test_ledger import PG_SKIP, PG_URL

T0 = 1_800_000_000.0


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request, tmp_path):
    if request.param == "sqlite":
        database = IdentityDB(f"sqlite:///{tmp_path / 'identity.sqlite'}")
        yield database
        database.close()
        return
    if not PG_URL:
        pytest.skip(PG_SKIP)
    schema = f"w1_harden_{uuid.uuid4().hex[:12]}"
    database = IdentityDB(PG_URL, schema=schema)
    try:
        yield database
    finally:
        database.close()
        engine = sa.create_engine(PG_URL)
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


def test_sessions_live_until_revoked_idle_or_too_old(db):
    store = SessionStore(db, SessionPolicy(idle_s=600, absolute_s=3600))
    sid = store.create("alice", "fp1", now=T0)
    other = store.create("alice", "fp1", now=T0)
    bob = store.create("bob", "fp2", now=T0)
    live = store.check(sid, now=T0 + 1)
    assert live.user == "alice" and live.pw_fingerprint == "fp1" and len(live.csrf) >= 32
    with db.tx(write=False) as conn:  # only a hash of the id is stored
        stored = conn.execute(sa.select(sessions_table.c.sid_hash)).scalars().all()
    assert sid not in stored and len(stored) == 3
    store.revoke(sid)
    assert store.check(sid, now=T0 + 2) is None and store.check(other, now=T0 + 2) is not None
    assert store.revoke_user("alice") == 1 and store.check(other, now=T0 + 3) is None
    # idle: 601 s without a request; absolute: kept busy, still ends after an hour
    assert store.check(bob, now=T0 + 601) is None
    busy = store.create("bob", "fp2", now=T0)
    for t in range(500, 3600, 500):
        assert store.check(busy, now=T0 + t) is not None
    assert store.check(busy, now=T0 + 3601) is None
    assert store.check("", now=T0) is None and store.check("not-a-session", now=T0) is None


def test_throttle_backs_off_exponentially_and_always_releases(db):
    policy = ThrottlePolicy(account_failures=3, client_failures=100, backoff_s=10,
                            backoff_max_s=40, forget_after_s=3600)
    throttle = LoginThrottle(db, policy)
    waits = [throttle.record_failure("alice", "10.0.0.1", "wrong", now=T0 + i) for i in range(6)]
    assert waits == [0, 0, 10, 20, 40, 40]  # doubling, capped: never a lock-out
    now = T0 + 5
    assert throttle.wait_s("alice", "10.0.0.2", now=now) == pytest.approx(40)  # any client
    assert throttle.wait_s("bob", "10.0.0.2", now=now) == 0  # other accounts are not slowed
    assert throttle.wait_s("alice", "10.0.0.1", now=now + 41) == 0  # released
    # after a quiet hour the count starts over; a success clears the account's count
    assert throttle.record_failure("alice", "10.0.0.1", "wrong", now=T0 + 5 + 3601) == 0
    throttle.record_success("alice")
    assert throttle.wait_s("alice", "10.0.0.1", now=T0 + 3607) == 0


def test_one_client_guessing_many_accounts_is_slowed(db):
    throttle = LoginThrottle(db, ThrottlePolicy(account_failures=50, client_failures=4,
                                                backoff_s=30, backoff_max_s=60))
    for i in range(4):
        throttle.record_failure(f"user{i}", "2001:db8::1", "wrong", now=T0)
    # the same /64 network counts as one client; a success elsewhere does not reset it
    throttle.record_success("user0")
    assert throttle.wait_s("user9", "2001:db8::ffff", now=T0 + 1) == pytest.approx(29)
    assert throttle.wait_s("user9", "2001:db9::1", now=T0 + 1) == 0


def test_concurrent_failures_are_all_counted(db):
    throttle = LoginThrottle(db, ThrottlePolicy(account_failures=1000, client_failures=1000))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: throttle.record_failure("alice", f"10.0.0.{i % 3}", "wrong",
                                                        now=T0), range(40)))
    assert len(throttle.failed_logins(limit=None)) == 40
    with db.tx(write=False) as conn:
        failures = conn.execute(sa.select(throttle_table.c.failures).where(
            throttle_table.c.key == "account:alice")).scalar_one()
    assert failures == 40


def test_failed_logins_are_audited_and_listed_newest_first(db):
    throttle = LoginThrottle(db)
    throttle.record_failure("alice", "10.0.0.1", "unknown user or wrong password", now=T0)
    throttle.record_refusal("x" * 500, "10.0.0.2", "refused: backoff", now=T0 + 1)
    rows = throttle.failed_logins()
    assert [r.client for r in rows] == ["10.0.0.2", "10.0.0.1"]
    assert rows[0].user == "x" * 64 and rows[1].reason.startswith("unknown user")


def test_cli_lists_failed_logins(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COHORT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert cli.main(["failed-logins"]) == 2    # no server ever ran on this store
    assert "has no session tables" in capsys.readouterr().err
    assert not (tmp_path / "ledger.sqlite").exists()   # and looking did not create it
    db = IdentityDB(f"sqlite:///{tmp_path / 'ledger.sqlite'}")   # what the server creates
    assert cli.main(["failed-logins"]) == 0
    assert "No failed sign-ins" in capsys.readouterr().out
    LoginThrottle(db).record_failure("mallory", "198.51.100.7", "wrong", now=T0)
    db.close()
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["failed-logins", "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "198.51.100.7" in out and "'mallory'" in out and "2027-01-15" in out


@pytest.mark.parametrize("addr,key", [("10.1.2.3", "10.1.2.3"), ("::ffff:10.1.2.3", "10.1.2.3"),
                                      ("2001:db8::7", "2001:db8::/64"), (None, "unknown")])
def test_client_keys(addr, key):
    assert client_key(addr) == key
