"""Owner pages in a real browser: each opens without console errors; others are refused."""

from __future__ import annotations

import pytest

from layouts import ids
from services.identity.roles import Role
from tests.e2e.test_explore_browser import DOCS, _free_port, _severe

pytestmark = pytest.mark.e2e
OWNER_PAGES = {"/data": ids.DATA_UPLOAD, "/ledger": ids.LEDGER_TABLE,
               "/anonymize": ids.AN_RUN}


def _serve(dash_duo, tmp_path, role: Role):
    from app import create_app, services_of
    from tests.app.conftest import SessionAs

    app = create_app({"data_dir": tmp_path}, seed=3)
    services_of(app).identity = SessionAs(role)
    dash_duo.start_server(app, port=_free_port())


def test_owner_pages_open_without_console_errors(dash_duo, tmp_path):
    _serve(dash_duo, tmp_path, Role.OWNER)
    for path, marker in OWNER_PAGES.items():
        dash_duo.driver.get(dash_duo.server_url + path)
        dash_duo.wait_for_element(f"#{marker}", timeout=30)
        dash_duo.driver.save_screenshot(str(DOCS / f"page-{path.strip('/')}.png"))
    assert _severe(dash_duo.get_logs()) == []


def test_owner_pages_are_refused_to_a_collaborator(dash_duo, tmp_path):
    _serve(dash_duo, tmp_path, Role.COLLABORATOR)
    for path, marker in OWNER_PAGES.items():
        dash_duo.driver.get(dash_duo.server_url + path)
        dash_duo.wait_for_contains_text(f"#{ids.PAGE}", "for the data owner", timeout=30)
        assert not dash_duo.find_elements(f"#{marker}")
    nav = dash_duo.find_element(f"#{ids.NAV}").text
    assert "Ledger" not in nav and "Explore" in nav
