"""Published views in a real browser (issue 16): the owner publishes three figures, a third
party opens the page and steps through demo mode, and the exported HTML shows every figure
from disk with the network off (the partner page's own checks and screenshots:
test_partner_page_browser.py)."""

from __future__ import annotations

import time
import urllib.request

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from layouts import ids
from services.identity.users import add_user
from tests.e2e.test_explore_browser import _click, _free_port, _severe

pytestmark = pytest.mark.e2e
PASSWORD = "a long enough password"
PLOTS = ".js-plotly-plot"


def _sign_in(dash_duo, base: str, user: str) -> None:
    dash_duo.driver.get(base + "/login")
    dash_duo.wait_for_element("#username", timeout=30).send_keys(user)
    dash_duo.driver.find_element(By.ID, "password").send_keys(PASSWORD)
    dash_duo.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    dash_duo.wait_for_contains_text(f"#{ids.SESSION_BADGE}", user, timeout=30)


def _wait_js(driver, script: str, expected, timeout: float = 30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = driver.execute_script(script)
        if value == expected:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{script!r} stayed {value!r}, expected {expected!r}")


def _counter(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, ".demo-counter").text


def test_owner_publishes_partner_opens_steps_demo_and_export_opens_offline(dash_duo, tmp_path):
    from app import create_app

    users = tmp_path / "users.json"
    add_user(users, "olga", "owner", PASSWORD)
    add_user(users, "tina", "third_party", PASSWORD)
    app = create_app({"data_dir": tmp_path / "var", "users_file": users,   # default budgets
                      "secret_key": "browser-secret-" + "y" * 32}, seed=7)
    dash_duo.start_server(app, navigate=False, port=_free_port())
    driver, base = dash_duo.driver, dash_duo.server.url.rstrip("/")

    # the owner builds a page of three figures for third parties, sees the cost, confirms
    _sign_in(dash_duo, base, "olga")
    driver.get(base + "/publish")
    dash_duo.wait_for_element(f"#{ids.PUB_TITLE}", timeout=30).send_keys("Partner review")
    dash_duo.wait_for_element(f"#{ids.PUB_FIGURES} input", timeout=30)
    for n in range(3):
        _click(dash_duo, f"#{ids.PUB_FIGURES} .form-check:nth-child({n + 1}) input")
    dash_duo.wait_for_element(f"#{ids.PUB_SELECTED} tbody tr:nth-child(3)", timeout=30)
    _click(dash_duo, f"#{ids.PUB_QUOTE}")
    dash_duo.wait_for_contains_text(f"#{ids.PUB_QUOTE_OUT}", "Publishing charges", timeout=60)
    _click(dash_duo, f"#{ids.PUB_CONFIRM}")
    link = dash_duo.wait_for_element("#publish-new-link", timeout=60)
    path = link.get_attribute("href").split(base, 1)[-1]
    assert path.startswith("/views/")
    _click(dash_duo, f"#{ids.SESSION_BADGE} button[type=submit]")
    dash_duo.wait_for_element("#username", timeout=30)

    # a third party opens it: three figures with labels, tables and the total cost
    _sign_in(dash_duo, base, "tina")
    driver.get(base + path)
    dash_duo.wait_for_element(f"#{ids.VIEW_TOTAL}", timeout=30)
    _wait_js(driver, f"return document.querySelectorAll('.published-figure {PLOTS}').length", 3)
    assert len(driver.find_elements(By.CSS_SELECTOR, ".published-figure table")) == 3
    assert not driver.find_elements(By.CSS_SELECTOR, "#publish-confirm, #explore-role")

    # demo mode: full screen, one slide at a time (the cohort first), the arrow keys step
    _click(dash_duo, f"#{ids.VIEW_PAGE} a[href$='/demo']")
    deck = dash_duo.wait_for_element(f"#{ids.DEMO_DECK}", timeout=30)
    _wait_js(driver, "return document.querySelectorAll('.demo-slide .js-plotly-plot').length", 3)
    visible = ("return [...document.querySelectorAll('.demo-slide')]"
               ".map(s => getComputedStyle(s).visibility === 'visible')")
    assert driver.execute_script(visible) == [True, False, False, False]
    assert _counter(driver) == "1 / 4"
    deck.send_keys(Keys.ARROW_RIGHT)
    assert _counter(driver) == "2 / 4"
    assert driver.execute_script(visible) == [False, True, False, False]
    for _ in range(3):
        deck.send_keys(Keys.ARROW_RIGHT)             # stays on the last slide
    assert _counter(driver) == "4 / 4"
    deck.send_keys(Keys.ARROW_LEFT)
    assert driver.execute_script(visible) == [False, False, True, False]
    size = driver.execute_script(
        "return parseFloat(getComputedStyle(document.querySelector('.demo-caption')).fontSize)")
    assert size >= 30                                  # projector-sized type
    widths = driver.execute_script("return [...document.querySelectorAll("
                                   "'.demo-slide .js-plotly-plot')].map(g => g.offsetWidth)")
    assert min(widths) > 0.8 * driver.execute_script("return window.innerWidth")
    assert _severe(dash_duo.get_logs() or []) == []

    # the export, fetched with tina's session, opens from disk with the network off
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in driver.get_cookies())
    req = urllib.request.Request(base + path + "/export.html", headers={"Cookie": cookie})
    with urllib.request.urlopen(req, timeout=60) as resp:
        exported = tmp_path / "page.html"
        exported.write_bytes(resp.read())
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0})
    driver.get(exported.as_uri())
    _wait_js(driver, f"return document.querySelectorAll('{PLOTS}').length", 3)
    _wait_js(driver, "return document.querySelectorAll('.js-plotly-plot .main-svg').length > 0",
             True)
    assert driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)") == []
    assert driver.execute_script("return document.querySelectorAll('table').length") == 3
