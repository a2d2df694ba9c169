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


def _serve_users(dash_duo, tmp_path, key: str) -> tuple:
    """The app in users mode (one user per role), served; (driver, base URL)."""
    from app import create_app

    users = tmp_path / "users.json"
    for name, role in USERS.items():
        add_user(users, name, role, PASSWORD)
    app = create_app({"data_dir": tmp_path / "var", "users_file": users,
                      "secret_key": "a11y-secret-" + key * 32}, seed=7)
    dash_duo.start_server(app, navigate=False, port=_free_port())
    dash_duo.driver.set_script_timeout(120)
    return dash_duo.driver, dash_duo.server.url.rstrip("/")


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
    axe = _axe_source()
    driver, base = _serve_users(dash_duo, tmp_path, "x")

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


def _press_release(dash_duo) -> None:
    """Press Release as a person does (a real click focuses the button), pricing first when
    the grouping is not priced yet; returns once the answer is on screen."""
    button = f"#{ids.EX_RELEASE}"
    for _ in range(2):
        label = dash_duo.find_element(button).text
        if label.startswith("Released"):
            return
        el = dash_duo.find_element(button)
        dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", el)
        el.click()
        until(lambda was=label: dash_duo.find_element(button).text != was, timeout=120)
    until(lambda: dash_duo.find_element(button).text.startswith("Released"), timeout=120)


def _one_tab_stop(dash_duo, group_id: str) -> bool:
    """Whether Tab from a radio group's checked (or first) radio leaves the group at once."""
    from selenium.webdriver.common.keys import Keys

    radios = dash_duo.driver.find_elements(By.CSS_SELECTOR, f"#{group_id} input[type=radio]")
    start = next((r for r in radios if r.is_selected()), radios[0])
    dash_duo.driver.execute_script("arguments[0].focus();", start)
    start.send_keys(Keys.TAB)
    return dash_duo.driver.execute_script(
        "return !document.getElementById(arguments[0]).contains(document.activeElement);",
        group_id)


def test_no_serious_axe_violation_after_a_release_a_publish_and_an_upload(dash_duo, tmp_path):
    """Issue 23: each role scans Explore after its own release (focus then on the result,
    not <body>); the owner scans the Publish page after publishing, the published page, and
    the Data page after an upload; radio groups are one tab stop."""
    axe = _axe_source()
    driver, base = _serve_users(dash_duo, tmp_path, "z")
    driver.set_window_size(1400, 1000)
    found: list[str] = []
    focus: dict[str, str] = {}
    published = ""
    for user in ("carl", "tina", "olga"):      # the owner last: publishing releases views
        role = USERS[user]
        _sign_in(dash_duo, base, user)
        _open(dash_duo, base, "/", owner=role == "owner")
        _press_release(dash_duo)
        until(lambda: driver.execute_script(
            "return document.activeElement && document.activeElement.id") == ids.EX_GRAPHS,
            timeout=30)
        focus[role] = driver.execute_script("return document.activeElement.id")
        found += _scan(driver, axe, f"{role} / after a release")
        if role == "owner":
            assert _one_tab_stop(dash_duo, ids.EX_ROLE)
            assert _one_tab_stop(dash_duo, ids.EX_MECHANISM)
            _open(dash_duo, base, "/publish", owner=True)
            dash_duo.find_element(f"#{ids.PUB_TITLE}").send_keys("Partner review")
            dash_duo.wait_for_element(f"#{ids.PUB_FIGURES} input", timeout=30)
            driver.execute_script("arguments[0].click()", dash_duo.find_element(
                f"#{ids.PUB_FIGURES} .form-check:nth-child(1) input"))
            dash_duo.wait_for_element(f"#{ids.PUB_SELECTED} tbody tr", timeout=30)
            driver.execute_script("arguments[0].click()",
                                  dash_duo.find_element(f"#{ids.PUB_QUOTE}"))
            dash_duo.wait_for_contains_text(f"#{ids.PUB_QUOTE_OUT}", "Publishing charges",
                                            timeout=90)
            driver.execute_script("arguments[0].click()",
                                  dash_duo.find_element(f"#{ids.PUB_CONFIRM}"))
            link = dash_duo.wait_for_element("#publish-new-link", timeout=90)
            published = link.get_attribute("href").split(base, 1)[-1]
            found += _scan(driver, axe, "owner /publish after publishing")
            _open(dash_duo, base, "/data", owner=True)
            upload = tmp_path / "small.csv"
            upload.write_text("age,sex,smoker\n" + "".join(
                f"{40 + i % 30},{'F' if i % 2 else 'M'},{'yes' if i % 3 else 'no'}\n"
                for i in range(60)), encoding="utf-8")
            dash_duo.find_element(f"#{ids.DATA_UPLOAD} input[type=file]").send_keys(
                str(upload))
            dash_duo.wait_for_contains_text(f"#{ids.DATA_MESSAGE}", "Loaded 'small.csv'",
                                            timeout=60)
            found += _scan(driver, axe, "owner /data after an upload")
        else:                      # My releases: one tab stop, however many items
            assert _one_tab_stop(dash_duo, ids.EX_REOPEN)
        driver.execute_script("arguments[0].click()", driver.find_element(
            By.CSS_SELECTOR, f"#{ids.SESSION_BADGE} button[type=submit]"))
        dash_duo.wait_for_element("#username", timeout=30)
    _sign_in(dash_duo, base, "tina")              # the published page, as its audience
    driver.get(base + published)
    dash_duo.wait_for_element(f"#{ids.VIEW_TOTAL}", timeout=60)
    found += _scan(driver, axe, "third party, the published page")

    assert found == [], "\n".join(found)
    assert focus == {role: ids.EX_GRAPHS for role in USERS.values()}
