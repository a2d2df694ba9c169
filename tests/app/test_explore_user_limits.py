"""Per-user limits inside the role's shared budget hold when 8 logged-in sessions of two
collaborators press Release at the same time (real logins, the app's own callback route)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.identity.roles import Role
from services.identity.users import add_user
from services.ledger.audit import check_invariants
from tests.app.explore_client import render
from tests.app.test_explore_sessions import PASSWORD, _login

USER_LIMIT = 0.6
VIEWS = [(view, x, group, role)
         for role in ("collaborator", "third_party")
         for view, x, group in (("mean", "Age", "PIRADS score"), ("mean", "Age", "none"),
                                ("variance", "Age", "Prostatitis"), ("median", "Age", "none"),
                                ("histogram", "Age", "none"),
                                ("variance", "Age", "none"))]


@pytest.fixture
def two_collaborators(tmp_path):
    from app import create_app

    users = tmp_path / "users.json"
    for name in ("alice", "bob"):
        add_user(users, name, Role.COLLABORATOR, PASSWORD)
    return create_app({"data_dir": tmp_path, "users_file": users, "secret_key": "k" * 32,
                       "budgets": {"collaborator": 5,
                                   "per_user": {"collaborator": USER_LIMIT}}}, seed=8)


def test_per_user_limits_hold_under_eight_concurrent_sessions(two_collaborators):
    from app import services_of

    app = two_collaborators
    sessions = [(name, _login(app, name)) for name in ("alice", "bob") * 4]
    start = threading.Barrier(len(sessions))

    def work(i: int) -> list[str]:
        name, client = sessions[i]
        start.wait()
        messages = []
        for k in range(len(VIEWS)):
            view, x, group, role = VIEWS[(i + k) % len(VIEWS)]
            reply = render(client, role=role, view=view, x=x, group=group)
            assert reply.status == 200, reply.text
            messages.append(reply.message)
        return messages

    with ThreadPoolExecutor(len(sessions)) as pool:
        outcomes = list(pool.map(work, range(len(sessions))))

    ledger = services_of(app).ledger
    for name in ("alice", "bob"):
        status = ledger.status(role=Role.COLLABORATOR, dataset_id="pirads", user=name)
        charged = sum(r.charged for r in ledger.releases(user=name, dataset_id="pirads"))
        assert status.user.spent == pytest.approx(charged)
        assert 0 < status.user.spent <= USER_LIMIT + 1e-9, (name, status.user)
    refusals = [m for ms in outcomes for m in ms if "on dataset" in m and "user '" in m]
    assert refusals, "two users asking 12 distinct views each must meet their limit"
    assert all("Nothing was charged" in m for m in refusals)
    total = ledger.status(role=Role.COLLABORATOR, dataset_id="pirads", user="").role.spent
    assert total <= 2 * USER_LIMIT + 1e-9
    assert check_invariants(ledger) == []
