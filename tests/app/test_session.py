"""One session object between the Explore page and the ledger (issue 22 item 1).

A screen reads what it shows in one transaction (``Session.look``), so: a preview takes one
transaction, a screen of answers the role already holds two (its read, then the delivery
log), a fresh release three (the read, then the door's two), a reopen two. Counted with
SQLAlchemy's ``begin`` events on the ledger's engine, over HTTP as a browser posts, on SQLite
and on PostgreSQL.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from layouts import ids
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger.audit import check_invariants
from services.ledger.models import ID_MAX
from services.session import Session
from services.views.queries import ViewRequest
from tests.app.conftest import SessionAs
from tests.app.explore_client import post, reopen
from tests.app.test_ledger import BACKENDS, backend_for

VALUES = {"dataset": "pirads", "role": "collaborator", "view": "mean", "x": "Age",
          "group": "PIRADS score"}


@pytest.fixture(params=BACKENDS)
def ledger_url(request, tmp_path):
    """An empty ledger's URL: a SQLite file, or PostgreSQL with the app's own tables in this
    run's schema (through the search path, so a runner child finds them too)."""
    gen = backend_for(request.param, tmp_path)
    url, schema = next(gen)
    if schema:
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        engine.dispose()
        url += ("&" if "?" in url else "?") + f"options=-csearch_path%3D{schema}"
    yield url
    gen.close()


@pytest.fixture
def counted(ledger_url, tmp_path):
    """(app, services, counter) with a collaborator session; counter() = transactions begun
    on the ledger since the last call."""
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path / "data", "database_url": ledger_url}, seed=5)
    services = services_of(app)
    services.identity = SessionAs(Role.COLLABORATOR, "carl")
    begun = [0]
    event.listen(services.ledger.db.base_engine, "begin",
                 lambda _conn: begun.__setitem__(0, begun[0] + 1))

    def counter() -> int:
        n, begun[0] = begun[0], 0
        return n

    yield app, services, counter


def test_a_screen_takes_one_read_and_spends_through_the_door(counted):
    app, services, transactions = counted
    client = app.server.test_client()
    carl = Identity("carl", Role.COLLABORATOR, True)
    req = ViewRequest("pirads", "mean", "Age", "PIRADS score", "sound", Role.COLLABORATOR)
    Session(services, carl).price(services.registry.get("pirads"), req)   # warm: calibration,
    post(client, ids.EX_VIEW, **VALUES)                                 # the grouping's sizes
    transactions()
    shown = post(client, ids.EX_VIEW, **VALUES)                 # a preview
    assert shown.preview and transactions() == 1
    released = post(client, ids.EX_RELEASE, **VALUES)           # a fresh release
    assert released.release_ids() and not released.preview
    assert transactions() <= 3
    again = post(client, ids.EX_RELEASE, **VALUES)              # answers the role has
    assert "Opened free" in again.text and transactions() <= 2
    moved = post(client, ids.EX_GROUP, **VALUES)                # a control back to it
    assert "Opened free" in moved.text and transactions() <= 2
    (rid,) = released.release_ids()
    back = reopen(client, rid, **{**VALUES, "view": "histogram"})
    assert f"Reopened release #{rid}" in back.text and transactions() <= 2
    channels = [c for _, _, _, c in _deliveries(services)]
    assert channels == ["explore", "explore", "explore-reopen"]
    assert check_invariants(services.ledger) == []


def test_a_foreign_release_id_is_refused_and_logs_nothing(counted, caplog):
    app, services, _ = counted
    owner = Identity("olga", Role.OWNER, True)
    req = ViewRequest("pirads", "mean", "Age", None, "sound", Role.OWNER)
    (_, rid, _), = Session(services, owner).serve(services.registry.get("pirads"), [req])
    carl = Session(services, Identity("carl", Role.COLLABORATOR, True))
    past = ("9" * 18, str(ID_MAX + 1), 2**63 - 1, "0")     # no row has them (int4 ids)
    for forged in (rid, str(rid), f"{rid} ", "1e3", "-1", 10**30, None, "../1", "²", *past):
        assert carl.reopen(forged) is None and carl.export(forged, "csv") is None
    assert services.ledger.served(2**63 - 1) is None
    assert _deliveries(services) == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def _deliveries(services) -> list:
    from sqlalchemy import select

    from services.ledger.models import deliveries

    with services.ledger.db.tx(write=False) as conn:
        return [tuple(r) for r in conn.execute(select(
            deliveries.c.user_name, deliveries.c.role, deliveries.c.release_id,
            deliveries.c.channel).order_by(deliveries.c.id))]


@dataclass
class _Counted:
    """Runner work that counts the transactions it begins on the child's own ledger engine
    (appended to ``path``, one line per piece of work). Module-level: a spawned child
    unpickles it by name."""

    fn: Any
    path: str

    @property
    def __name__(self) -> str:
        return self.fn.__name__

    def __call__(self, services, progress, *args):
        begun = [0]

        def count(_conn) -> None:
            begun[0] += 1

        engine = services.ledger.db.base_engine
        event.listen(engine, "begin", count)
        try:
            return self.fn(services, progress, *args)
        finally:
            event.remove(engine, "begin", count)
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(f"{begun[0]}\n")


def test_with_runner_children_a_fresh_release_takes_three_transactions(ledger_url, tmp_path,
                                                                       monkeypatch):
    """The deployment's path (COHORT_RUNNER_PROCESSES ≥ 1): the web worker's and the
    child's transactions together, per screen. The worker's one read decides a fresh
    release; the child runs the door alone."""
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path / "data", "runner_processes": 1,
                      "database_url": ledger_url}, seed=5)
    services = services_of(app)
    services.identity = SessionAs(Role.COLLABORATOR, "carl")
    here = [0]
    event.listen(services.ledger.db.base_engine, "begin",
                 lambda _conn: here.__setitem__(0, here[0] + 1))
    log = tmp_path / "child-transactions"
    real = services.runner.call
    monkeypatch.setattr(services.runner, "call", lambda fn, *args, **kw: real(
        _Counted(fn, str(log)), *args, **kw))

    def transactions() -> int:
        child = sum(int(n) for n in log.read_text().split()) if log.exists() else 0
        log.unlink(missing_ok=True)
        n, here[0] = here[0] + child, 0
        return n

    try:
        client = app.server.test_client()
        carl = Identity("carl", Role.COLLABORATOR, True)
        req = ViewRequest("pirads", "mean", "Age", "PIRADS score", "sound", Role.COLLABORATOR)
        Session(services, carl).price(services.registry.get("pirads"), req)
        post(client, ids.EX_VIEW, **VALUES)        # warm: each lane's child reads the public
        post(client, ids.EX_RELEASE, **{**VALUES, "view": "histogram"})   # calibration once
        transactions()
        shown = post(client, ids.EX_VIEW, **VALUES)                 # a preview
        assert shown.preview
        previewed = transactions()
        released = post(client, ids.EX_RELEASE, **VALUES)           # a fresh release
        assert released.release_ids() and not released.preview
        fresh = transactions()
        again = post(client, ids.EX_GROUP, **VALUES)                # answers the role has
        assert "Opened free" in again.text
        cached = transactions()
        assert (previewed, fresh, cached) == (2, 3, 2)   # a preview: the worker's read and
        # the child's (its plans and quotes hold closures: they do not cross a pipe)
        assert check_invariants(services.ledger) == []
    finally:
        services.runner.close()


def test_a_screen_reads_each_payers_spend_once(counted, monkeypatch):
    """The screen's request and the presets' are quoted from one spend read per paying role
    (it was read again for every request quoted, then once more for the status)."""
    from services.ledger import door
    from services.views.screen import preset_requests

    _, services, _ = counted
    carl = Identity("carl", Role.COLLABORATOR, True)
    ds = services.registry.get("pirads")
    req = ViewRequest("pirads", "mean", "Age", None, "sound", Role.COLLABORATOR)
    presets = preset_requests(carl, ds, {"dataset": "pirads", "mechanism": "sound"})
    real, calls = door.read_spend, []
    monkeypatch.setattr(door, "read_spend",
                        lambda ledger, conn, role, *a: calls.append(role) or real(
                            ledger, conn, role, *a))
    look = Session(services, carl).look(ds, [req], presets=presets)
    assert len([p for p in presets if p is not None]) >= 3 and len(look.preset_quotes) >= 3
    assert sorted(calls) == sorted(set(calls)) and Role.COLLABORATOR in calls
