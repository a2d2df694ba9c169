"""The Explore page behind real logins: the role comes from the session, whatever is POSTed."""

from __future__ import annotations

import re

import pytest

from services.identity.roles import Role
from services.identity.users import add_user
from tests.app.explore_client import render

PASSWORD = "correct horse battery staple"


@pytest.fixture
def login_app(tmp_path):
    from app import create_app

    users = tmp_path / "users.json"
    add_user(users, "carol", Role.COLLABORATOR, PASSWORD)
    add_user(users, "tess", Role.THIRD_PARTY, PASSWORD)
    add_user(users, "olga", Role.OWNER, PASSWORD)
    return create_app({"data_dir": tmp_path, "users_file": users,
                       "secret_key": "s" * 32}, seed=11)


def _login(app, name: str):
    client = app.server.test_client()
    page = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    resp = client.post("/login", data={"username": name, "password": PASSWORD, "csrf": csrf})
    assert resp.status_code in (302, 303), resp.get_data(as_text=True)[:300]
    return client


def test_no_session_gets_401_on_the_callback_route(login_app):
    reply = render(login_app.server.test_client())
    assert reply.status == 401


def test_third_party_session_forging_owner_and_paper_is_answered_at_its_tier(login_app):
    tess = _login(login_app, "tess")
    forged = render(tess, role="owner", mechanism="paper", compare=True)
    assert forged.status == 200, forged.text
    assert "10–20 %" in forged.panel_text
    assert "Realized" not in forged.text and "paper mode" not in forged.text.lower()
    assert len(forged.figures()) == 1


def test_collaborator_can_preview_third_party_but_not_owner(login_app):
    carol = _login(login_app, "carol")
    lower = render(carol, role="third_party", view="mean")
    higher = render(carol, role="owner", view="mean")
    assert "10–20 %" in lower.panel_text
    assert "5–10 %" in higher.panel_text and "Realized" not in higher.text


def test_owner_session_sees_realized_noise(login_app):
    olga = _login(login_app, "olga")
    reply = render(olga, view="mean")
    assert "Realized noise" in reply.panel_text
