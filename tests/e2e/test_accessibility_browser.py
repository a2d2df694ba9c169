"""WCAG 2.2 AA in a real Chromium: axe-core on every page, for every role and signed out.

One users-mode app and one browser for the whole check: the sign-in page (anonymous), then
each role signs in and every page is scanned (the owner's pages are refusals for the others),
the owner's Anonymize report and compare mode too. axe-core comes from the npm registry
(``make install`` puts it in ``.venv/axe``); a serious or critical violation fails the test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from dash.testing.wait import until
from selenium.webdriver.common.by import By

from callbacks.shell import page_title
from layouts import ids
from services.identity.users import add_user
from tests.e2e.test_explore_browser import GRAPH, _free_port

pytestmark = pytest.mark.e2e
AXE = Path(__file__).resolve().parents[2] / ".venv" / "axe" / "node_modules" / "axe-core" \
    / "axe.min.js"
PASSWORD = "a long enough password"
USERS = {"olga": "owner", "carl": "collaborator", "tina": "third_party"}
MARKERS = {"/": GRAPH, "/data": f"#{ids.DATA_UPLOAD}", "/ledger": f"#{ids.LEDGER_TABLE}",
           "/anonymize": f"#{ids.AN_RUN}", "/publish": f"#{ids.PUB_TITLE}",
           "/release": f"#{ids.ST_RUN}"}
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
BLOCKING = {"serious", "critical"}


def _axe_source() -> str:
    if not AXE.exists():
        message = f"axe-core is not installed at {AXE}: run `make install`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return AXE.read_text(encoding="utf-8")


def _scan(driver, axe: str, where: str) -> list[str]:
    """axe-core's serious and critical violations on the current page, one line each."""
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        driver.execute_script(axe)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: {type: 'tag', values: arguments[0]}})"
        ".then(r => done(JSON.stringify(r.violations)), e => done(String(e)));", AXE_TAGS)
    violations = json.loads(result)
    return [f"{where}: [{v['impact']}] {v['id']} ({v['help']}) at "
            + "; ".join(" ".join(n["target"]) for n in v["nodes"][:3])
            for v in violations if v["impact"] in BLOCKING]


def _sign_in(dash_duo, base: str, user: str) -> None:
    dash_duo.driver.get(base + "/login")
    dash_duo.wait_for_element("#username", timeout=30).send_keys(user)
    dash_duo.driver.find_element(By.ID, "password").send_keys(PASSWORD)
    dash_duo.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    dash_duo.wait_for_contains_text(f"#{ids.SESSION_BADGE}", user, timeout=60)


def _open(dash_duo, base: str, path: str, owner: bool) -> None:
    dash_duo.driver.get(base + path)
    if owner or path == "/":
        dash_duo.wait_for_element(MARKERS[path], timeout=60)
    elif path == "/release":   # open to all; per-record copies are the owner's only
        dash_duo.wait_for_contains_text(f"#{ids.PAGE}", "data owner's only", timeout=30)
    else:
        dash_duo.wait_for_contains_text(f"#{ids.PAGE}", "for the data owner", timeout=30)
    dash_duo.wait_for_element(f"#{ids.NAV} a", timeout=30)


def test_every_page_and_role_has_no_serious_or_critical_axe_violation(dash_duo, tmp_path):
    from app import create_app

    axe = _axe_source()
    users = tmp_path / "users.json"
    for name, role in USERS.items():
        add_user(users, name, role, PASSWORD)
    app = create_app({"data_dir": tmp_path / "var", "users_file": users,
                      "secret_key": "a11y-secret-" + "x" * 32}, seed=7)
    dash_duo.start_server(app, navigate=False, port=_free_port())
    driver, base = dash_duo.driver, dash_duo.server.url.rstrip("/")
    driver.set_script_timeout(120)

    driver.get(base + "/")  # signed out: redirected to the sign-in page
    dash_duo.wait_for_element("#username", timeout=30)
    found = _scan(driver, axe, "sign-in page")
    assert driver.execute_script("return document.documentElement.lang") == "en"

    titles = {}
    for user, role in USERS.items():
        owner = role == "owner"
        _sign_in(dash_duo, base, user)
        for path in MARKERS:
            _open(dash_duo, base, path, owner)
            found += _scan(driver, axe, f"{role} {path}")
            titles[path] = driver.title
        if owner:  # the Anonymize report (cards, tables, the scatter's data table)
            _open(dash_duo, base, "/anonymize", owner)
            driver.execute_script("arguments[0].click()", dash_duo.find_element(f"#{ids.AN_RUN}"))
            dash_duo.wait_for_element(f"#{ids.AN_REPORT} table", timeout=60)
            dash_duo.wait_for_element(f"#{ids.AN_SCATTER_TABLE} tbody tr td", timeout=30)
            found += _scan(driver, axe, "owner /anonymize report")
        driver.execute_script("arguments[0].click()", driver.find_element(
            By.CSS_SELECTOR, f"#{ids.SESSION_BADGE} button[type=submit]"))
        dash_duo.wait_for_element("#username", timeout=30)

    assert found == [], "\n".join(found)
    assert titles == {path: page_title(path) for path in MARKERS}


def test_phone_navbar_collapses_and_compare_mode_stacks_below_1200px(dash_duo, tmp_path):
    from app import create_app

    app = create_app({"data_dir": tmp_path}, seed=7)  # embedded: the local owner
    driver = dash_duo.driver
    driver.set_window_size(390, 844)
    dash_duo.start_server(app, port=_free_port())
    dash_duo.wait_for_element(GRAPH, timeout=60)
    toggle = dash_duo.find_element(f"#{ids.NAV_TOGGLE}")
    assert toggle.is_displayed()
    assert not dash_duo.find_element(f"#{ids.NAV}").is_displayed()
    toggle.click()
    dash_duo.wait_for_element(f"#{ids.NAV} a", timeout=10)
    until(lambda: dash_duo.find_element(f"#{ids.NAV}").is_displayed(), timeout=10)
    assert toggle.get_attribute("aria-expanded") == "true"

    driver.set_window_size(1024, 800)
    driver.execute_script("arguments[0].click()", dash_duo.find_element(f"#{ids.EX_COMPARE}"))
    until(lambda: len(dash_duo.find_elements(GRAPH)) == 3, timeout=60)
    column = dash_duo.find_element(".graphs-col").size["width"]
    widths = [g.size["width"] for g in dash_duo.find_elements(GRAPH)]
    # stacked: each tier's chart spans its column (side by side each would get a third)
    assert all(w > 0.8 * column for w in widths), (widths, column)
