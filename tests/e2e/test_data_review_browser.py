"""The Data page in Chromium: a 30-column export confirmed in at most ten clicks (issue 23).

Every click the owner makes is counted, from choosing the file to the confirmation: one tick
per kind of decision read off the data, then Confirm schema. axe-core finds no serious or
critical violation after the upload nor after confirming; the schema table's last row opens
its dropdown without the page scrolling.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from layouts import ids
from services.identity.roles import Role
from tests.app.clinical_standins import trial_table
from tests.e2e.test_accessibility_browser import _axe_source, _scan
from tests.e2e.test_explore_browser import DOCS, _free_port, _severe

pytestmark = pytest.mark.e2e
MAX_CLICKS = 10


def _open_data_page(dash_duo, tmp_path, height: int = 1000):
    from app import create_app, services_of
    from tests.app.conftest import SessionAs

    app = create_app({"data_dir": tmp_path / "app"}, seed=5)
    services_of(app).identity = SessionAs(Role.OWNER)
    dash_duo.start_server(app, port=_free_port())
    dash_duo.driver.set_window_size(1400, height)
    dash_duo.driver.get(dash_duo.server_url + "/data")
    dash_duo.wait_for_element(f"#{ids.DATA_UPLOAD}", timeout=30)
    dash_duo.wait_for_element(f"#{ids.DATA_TABLE} td", timeout=30)
    # Bootstrap scrolls smoothly; Selenium clicks where an element was before the animation
    dash_duo.driver.execute_script("document.documentElement.style.scrollBehavior = 'auto'")
    return services_of(app).registry


def _unticked_boxes(dash_duo) -> list:
    """The checklist's visible, unticked boxes: what still needs the owner's tick."""
    boxes = dash_duo.driver.find_elements(
        By.CSS_SELECTOR, f"#{ids.DATA_CHECKLIST} input[type=checkbox]")
    return [b for b in boxes if b.is_displayed() and not b.is_selected()]


def test_a_30_column_export_is_confirmed_in_at_most_ten_clicks(dash_duo, tmp_path):
    axe = _axe_source()
    registry = _open_data_page(dash_duo, tmp_path)
    driver = dash_duo.driver
    driver.set_script_timeout(120)
    table = trial_table()
    assert table.shape[1] == 30
    path = tmp_path / "trial.csv"
    table.to_csv(path, index=False)

    clicks = 1  # choosing the file in the upload's dialog
    dash_duo.find_element(f"#{ids.DATA_UPLOAD} input[type=file]").send_keys(str(path))
    dash_duo.wait_for_contains_text(f"#{ids.DATA_MESSAGE}", "Loaded 'trial.csv'", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.DATA_CHECKLIST}", "become public", timeout=30)
    text = dash_duo.find_element(f"#{ids.DATA_CHECKLIST}").text
    for shown in ("These 2 bounds read from the data become public", "2009 to 2012",
                  "These 4 category lists read from the data become public",
                  "These 21 columns become public as yes/no", "1_north, 2_east, 3_south, 4_west",
                  "Accept the clinical default for this column", "stay hidden"):
        assert shown in text, shown
    found = _scan(driver, axe, "owner /data after an upload")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});",
                          dash_duo.find_element(f"#{ids.DATA_REPORT}"))
    driver.save_screenshot(str(DOCS / "data-review.png"))

    boxes = _unticked_boxes(dash_duo)
    assert len(boxes) == 2  # bounds and category lists: the kinds read off the data
    for box in boxes:
        label = driver.find_element(By.CSS_SELECTOR, f"label[for='{box.get_attribute('id')}']")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", label)
        label.click()
        clicks += 1
    assert _unticked_boxes(dash_duo) == []
    confirm = dash_duo.find_element(f"#{ids.DATA_CONFIRM}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", confirm)
    confirm.click()
    clicks += 1
    dash_duo.wait_for_contains_text(f"#{ids.DATA_MESSAGE}", "now public metadata", timeout=30)

    schema = registry.get("trial", owner=False).schema
    assert schema.confirmed and not schema.flagged_columns()
    assert clicks <= MAX_CLICKS, clicks
    dash_duo.wait_for_contains_text(f"#{ids.DATA_REPORT}", "Confirmed", timeout=30)
    summary = dash_duo.find_element(f"#{ids.DATA_PUBLIC_SUMMARY}").text
    assert summary.startswith("Confirmed: the metadata listed above for 28 column(s)"), summary
    found += _scan(driver, axe, "owner /data after confirming")
    assert found == [], "\n".join(found)
    assert _severe(dash_duo.get_logs()) == []


def test_the_last_rows_dropdown_opens_without_scrolling(dash_duo, tmp_path):
    _open_data_page(dash_duo, tmp_path, height=900)
    driver = dash_duo.driver
    rows = driver.find_elements(By.CSS_SELECTOR, f"#{ids.DATA_TABLE} tbody tr")
    last = rows[-1]
    # the last row at the bottom edge of the window, as the owner sees it after reading down
    driver.execute_script("arguments[0].scrollIntoView({block: 'end'});", last)
    before = driver.execute_script("return window.scrollY")
    cell = last.find_element(By.CSS_SELECTOR, "td[data-dash-column='kind']")
    cell.click()
    cell.find_element(By.CSS_SELECTOR, ".Select-control").click()
    option = dash_duo.wait_for_element(
        f"#{ids.DATA_TABLE} tr:last-child .Select-menu-outer .Select-option", timeout=10)
    top, bottom, height = driver.execute_script(
        "const r = arguments[0].closest('.Select-menu-outer').getBoundingClientRect();"
        "return [r.top, r.bottom, window.innerHeight];", option)
    assert top >= 0 and bottom <= height, (top, bottom, height)  # the whole menu is in view
    options = driver.find_elements(
        By.CSS_SELECTOR, f"#{ids.DATA_TABLE} tr:last-child .Select-menu-outer .Select-option")
    next(o for o in options if o.text == "boolean").click()
    assert driver.execute_script("return window.scrollY") == before
    assert last.find_element(By.CSS_SELECTOR, "td[data-dash-column='kind']").text.strip() \
        == "boolean"
    assert _severe(dash_duo.get_logs()) == []
