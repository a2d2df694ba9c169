"""Fixtures: a fresh app per test (own SQLite ledger), with a switchable session role."""

from __future__ import annotations

import pytest

from services.identity.roles import Role
from services.identity.session import Identity


class SessionAs:
    """Stands in for the server session: tests choose who is logged in."""

    def __init__(self, role: Role, user: str | None = None) -> None:
        self.identity = Identity(user or f"test-{role.value}", role, True)

    def current(self) -> Identity:
        return self.identity

    def set(self, role: Role, user: str | None = None) -> None:
        self.identity = Identity(user or f"test-{role.value}", role, True)


@pytest.fixture
def explore_app(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path}, seed=20261126)
    services = services_of(app)
    services.identity = SessionAs(Role.OWNER)
    return app


@pytest.fixture
def session(explore_app) -> SessionAs:
    from app import services_of

    return services_of(explore_app).identity


@pytest.fixture
def client(explore_app):
    return explore_app.server.test_client()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request, tmp_path):
    """(url, schema) of an empty ledger database: SQLite, and PostgreSQL (TEST_DATABASE_URL)."""
    from tests.app.test_ledger import backend_for

    yield from backend_for(request.param, tmp_path)


@pytest.fixture
def make_ledger(backend):
    """Open ledgers on ``backend`` (closed afterwards): ``make_ledger(policy=None)``."""
    from services.ledger.policy import BudgetPolicy
    from services.ledger.store import Ledger

    opened: list[Ledger] = []

    def make(policy: BudgetPolicy | None = None) -> Ledger:
        url, schema = backend
        # the ledger's mechanics are tested at small fixed budgets, whatever the defaults
        led = Ledger(url, policy or BudgetPolicy.from_mapping(
            {"collaborator": 5, "third_party": 1}), schema=schema)
        opened.append(led)
        return led

    yield make
    for led in opened:
        led.close()
