"""Spend only on purpose (issue 21 item 6): a one-click preset that would take more than a
quarter of what a non-owner has left asks first, with the price on the Release button; the
owner's presets and small spends release at once."""

from __future__ import annotations

import pytest

from layouts import ids
from services.identity.roles import Role
from services.identity.session import Identity
from services.session import Session
from services.views.queries import ViewRequest
from tests.app.conftest import SessionAs
from tests.app.explore_client import post, preset

THIRD = {"dataset": "pirads", "role": "third_party"}


@pytest.fixture
def app(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path, "budgets": {"third_party": 2.0}}, seed=4)
    s = services_of(app)
    s.identity = SessionAs(Role.THIRD_PARTY, "tina")
    owner = Identity("olga", Role.OWNER, True)
    for group in ("PIRADS score", "Prostatitis"):          # the owner priced the groupings
        Session(s, owner).price(s.registry.get("pirads"),
                                ViewRequest("pirads", "mean", "Age", group, "sound", Role.OWNER))
    return app


def _spent(app) -> float:
    from app import services_of

    return services_of(app).ledger.budget(role=Role.THIRD_PARTY, dataset_id="pirads").spent


def test_a_large_preset_asks_first_and_release_spends_its_price(app):
    client = app.server.test_client()
    asked = preset(client, "fig2", **THIRD)
    assert asked.preview and "more than a quarter" in asked.message
    assert _spent(app) == 0.0
    label = asked.release_label
    assert label.startswith("Release (ε ")
    price = float(label.split("ε ")[1].rstrip(")"))
    assert price > 0.25 * 2.0
    released = post(client, ids.EX_RELEASE, **THIRD, view="histogram", x="Age",
                    group="PIRADS score")
    assert released.figures() and not released.preview
    assert _spent(app) == pytest.approx(price, rel=1e-3)


def test_a_small_preset_releases_at_once(app):
    client = app.server.test_client()
    done = preset(client, "fig5", **THIRD)                  # Fig. 5 costs about ε 0.1
    assert done.figures() and not done.preview and "more than a quarter" not in done.text
    assert 0 < _spent(app) < 0.25 * 2.0


def test_the_owner_is_never_asked(app):
    from app import services_of

    services_of(app).identity = SessionAs(Role.OWNER, "olga")
    done = preset(app.server.test_client(), "fig4", dataset="pirads", role="owner")
    assert done.figures() and not done.preview
