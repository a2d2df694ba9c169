"""Sign in and out in a real browser, in users mode, under the Content-Security-Policy."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from layouts import ids
from services.identity.users import add_user
from tests.e2e.test_explore_browser import GRAPH, _free_port, _severe

pytestmark = pytest.mark.e2e
PASSWORD = "a long enough password"


def test_sign_in_draw_a_figure_and_sign_out_without_csp_errors(dash_duo, tmp_path):
    from app import create_app

    users = tmp_path / "users.json"
    add_user(users, "tina", "third_party", PASSWORD)
    app = create_app({"data_dir": tmp_path / "var", "users_file": users,
                      "secret_key": "browser-secret-" + "x" * 32}, seed=5)
    dash_duo.start_server(app, navigate=False, port=_free_port())  # '/' redirects to sign-in
    driver, base = dash_duo.driver, dash_duo.server.url.rstrip("/")
    driver.get(base + "/")
    dash_duo.wait_for_element("#username", timeout=30).send_keys("tina")
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    dash_duo.wait_for_element(GRAPH, timeout=60)  # Dash and plotly.js run under the CSP
    dash_duo.wait_for_contains_text(f"#{ids.SESSION_BADGE}", "tina", timeout=30)
    driver.find_element(By.CSS_SELECTOR, f"#{ids.SESSION_BADGE} button[type=submit]").click()
    dash_duo.wait_for_element("#username", timeout=30)
    assert "/login" in driver.current_url
    driver.get(base + "/")
    dash_duo.wait_for_element("#username", timeout=30)  # the old session is gone
    logs = dash_duo.get_logs() or []
    assert not [e for e in logs if "Content Security Policy" in e.get("message", "")]
    assert _severe(logs) == [], _severe(logs)
