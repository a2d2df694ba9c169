"""The partner page in a real Chromium (issue 23): what a third party takes away.

The owner describes the ward's cohort and publishes three of its views through the Publish
page; a third party opens the page: the cohort (with its DP number of records), the methods
note, a figure withheld whole as a sentence (never an empty chart), one withheld in part, a
note on small counts, its own document title and one CSV of every figure. axe-core finds no
serious or critical violation on the Publish page after publishing, nor on the page and its
demo for the owner and the audience. Demo mode and the page read at 1280 and 390 px wide with
no text over other text and no text cut off.
"""

from __future__ import annotations

import csv
import io
import time
import urllib.request

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from layouts import ids
from services.csv_safe import is_safe
from services.identity.users import add_user
from services.publish.export import PAGE_CSV_HEADER
from tests.app.partner_support import (
    COHORT,
    WARD,
    page_figures,
    publish_ward,
    release_as_audience,
    ward_dataset,
)
from tests.e2e.layout_checks import text_problems
from tests.e2e.test_accessibility_browser import PASSWORD, _axe_source, _scan, _sign_in
from tests.e2e.test_explore_browser import DOCS, _click, _free_port, _severe

pytestmark = pytest.mark.e2e
WITHHELD = "too few patients to show at this noise level"
TITLE = "Ward review"
PRODUCT = "Private Cohort Explorer"


def _app(tmp_path):
    from app import create_app

    users = tmp_path / "users.json"
    add_user(users, "olga", "owner", PASSWORD)
    add_user(users, "tina", "third_party", PASSWORD)
    return create_app({"data_dir": tmp_path / "var", "users_file": users,
                       "secret_key": "partner-secret-" + "z" * 32,
                       "dataset_paths": [ward_dataset(tmp_path / "data")]}, seed=7)


def _sign_out(dash_duo) -> None:
    _click(dash_duo, f"#{ids.SESSION_BADGE} button[type=submit]")
    dash_duo.wait_for_element("#username", timeout=30)


def _wait(fn, timeout: float = 60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{fn} stayed false")


def _open_page(dash_duo, base: str, path: str, graphs: int) -> None:
    dash_duo.driver.get(base + path)
    dash_duo.wait_for_element(f"#{ids.VIEW_TOTAL}", timeout=60)
    _wait(lambda: len(dash_duo.find_elements(".published-figure .main-svg")) >= graphs)


def _open_demo(dash_duo, base: str, path: str, graphs: int):
    dash_duo.driver.get(base + path + "/demo")
    deck = dash_duo.wait_for_element(f"#{ids.DEMO_DECK}", timeout=60)
    _wait(lambda: len(dash_duo.find_elements(".demo-slide .main-svg")) >= graphs)
    return deck


def _get(driver, url: str) -> tuple[str, str]:
    """(body, content type) of ``url`` with the browser's session cookie."""
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in driver.get_cookies())
    req = urllib.request.Request(url, headers={"Cookie": cookie})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read().decode("utf-8"), resp.headers["Content-Type"]


def test_a_third_party_opens_a_partner_page_with_withheld_figures_and_its_csv(dash_duo,
                                                                              tmp_path):
    from app import services_of
    from services.identity.roles import Role
    from services.identity.session import Identity

    axe = _axe_source()
    app = _app(tmp_path)
    services = services_of(app)
    figures = page_figures(services, Identity("olga", Role.OWNER, True))
    listed = {c.key for c in services.publish.candidates(Identity("olga", Role.OWNER, True),
                                                         WARD)}
    for key, _label in figures:       # a view nobody released is not listed: tina asks it
        if key not in listed:
            release_as_audience(services, key)
    dash_duo.start_server(app, navigate=False, port=_free_port())
    driver, base = dash_duo.driver, dash_duo.server.url.rstrip("/")
    driver.set_window_size(1280, 1000)
    driver.set_script_timeout(120)
    found: list[str] = []

    # the owner describes the ward's cohort once, then publishes a view withheld whole, one
    # withheld in part and the age histogram
    _sign_in(dash_duo, base, "olga")
    driver.get(base + "/publish")
    dash_duo.wait_for_element(f"#{ids.PUB_TITLE}", timeout=30)
    dash_duo.select_dcc_dropdown(f"#{ids.PUB_DATASET}", index=1)
    _wait(lambda: len(dash_duo.find_elements(f"#{ids.PUB_FIGURES} input")) >= 5)
    for name, field in (("period", ids.PUB_COHORT_PERIOD),
                        ("inclusion", ids.PUB_COHORT_INCLUSION),
                        ("source", ids.PUB_COHORT_SOURCE)):
        box = dash_duo.find_element(f"#{field}")
        box.clear()
        for n, line in enumerate(COHORT[name].split("\n")):
            if n:
                box.send_keys(Keys.SHIFT, Keys.ENTER)
            box.send_keys(line)
    _click(dash_duo, f"#{ids.PUB_COHORT_SAVE}")
    dash_duo.wait_for_contains_text(f"#{ids.PUB_COHORT_MESSAGE}", "Saved", timeout=30)
    dash_duo.find_element(f"#{ids.PUB_TITLE}").send_keys(TITLE)
    for check in driver.find_elements(By.CSS_SELECTOR, f"#{ids.PUB_FIGURES} .form-check"):
        if check.text.removesuffix(" (not released yet)") in {label for _, label in figures}:
            driver.execute_script("arguments[0].click()",
                                  check.find_element(By.CSS_SELECTOR, "input"))
    dash_duo.wait_for_element(f"#{ids.PUB_SELECTED} tbody tr:nth-child(3)", timeout=30)
    _click(dash_duo, f"#{ids.PUB_QUOTE}")
    dash_duo.wait_for_contains_text(f"#{ids.PUB_QUOTE_OUT}", "can afford", timeout=90)
    quote = dash_duo.find_element(f"#{ids.PUB_QUOTE_OUT}").text
    assert quote.count("every group withheld") == 1 and "Press Publish" in quote
    assert dash_duo.find_element(f"#{ids.PUB_CONFIRM}").is_enabled()
    _click(dash_duo, f"#{ids.PUB_CONFIRM}")
    link = dash_duo.wait_for_element("#publish-new-link", timeout=90)
    path = link.get_attribute("href").split(base, 1)[-1]
    found += _scan(driver, axe, "owner /publish after publishing")
    _open_page(dash_duo, base, path, 2)
    found += _scan(driver, axe, "owner published page")
    _open_demo(dash_duo, base, path, 2)
    found += _scan(driver, axe, "owner demo")
    driver.get(base + "/publish")
    dash_duo.wait_for_element(f"#{ids.PUB_TITLE}", timeout=30)
    _sign_out(dash_duo)

    # the third party: the header, the methods note, two sentences, two charts
    _sign_in(dash_duo, base, "tina")
    _open_page(dash_duo, base, path, 2)
    assert driver.title == f"{TITLE} · {PRODUCT}"
    cohort = dash_duo.find_element(f"#{ids.VIEW_COHORT}").text
    for text in (COHORT["period"], "Aged 18 or over", COHORT["source"], "Ward cohort"):
        assert text in cohort, text
    assert "Records\nabout 1" in cohort and "differentially private count" in cohort
    note = dash_duo.find_element(f"#{ids.VIEW_METHODS}").text
    for text in ("What ε means", "95 % interval", "discrete Laplace", "spread",
                 "Withheld groups"):
        assert text in note, text
    withheld = driver.find_elements(By.CSS_SELECTOR, ".published-figure.withheld")
    assert len(withheld) == 1
    for card in withheld:
        assert WITHHELD in card.text and "Not shown" in card.text
        assert not card.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
    assert len(driver.find_elements(By.CSS_SELECTOR, ".published-figure .js-plotly-plot")) == 2
    page_text = dash_duo.find_element(f"#{ids.VIEW_PAGE}").text
    assert "does not prove that such" in page_text           # small counts in the histogram
    assert f"Withheld ({WITHHELD})" in page_text              # the box plot's missing groups
    found += _scan(driver, axe, "third party published page")
    driver.set_window_size(1280, 1800)    # the header and the first, withheld, figures
    time.sleep(0.5)
    driver.save_screenshot(str(DOCS / "published-view.png"))
    driver.set_window_size(1280, 1000)

    body, kind = _get(driver, base + path + "/page.csv")
    assert kind.startswith("text/csv")
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0] == PAGE_CSV_HEADER
    records = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert {r["figure"] for r in records} == {"1", "2", "3"}
    col = {name: n for n, name in enumerate(PAGE_CSV_HEADER)}
    for r in records:
        gone = r["withheld"] == WITHHELD
        assert (r["value"] == "") == gone and (r["ci95_low"] == "") == gone
        assert r["mechanism"] and r["figure_epsilon"] and r["differentially_private"] == "yes"
    whole = next(r["figure"] for r in records if r["caption"] == figures[0][1])
    assert all(r["withheld"] for r in records if r["figure"] == whole)
    assert all(r["value"] for r in records if r["caption"] == figures[2][1])
    assert all(is_safe(cell) for row in rows for cell in row), col

    _open_demo(dash_duo, base, path, 2)
    assert driver.title == f"{TITLE} (demo) · {PRODUCT}"
    found += _scan(driver, axe, "third party demo")
    assert found == [], "\n".join(found)
    assert _severe(dash_duo.get_logs() or []) == []


SIZES = {"desktop": (1280, 900), "phone": (390, 844)}


def _no_text_problems(driver, selectors: list[str], where: str) -> None:
    got = text_problems(driver, selectors)
    assert got["boxes"] > 5, (where, got)
    assert got["overlaps"] == [] and got["cut"] == [], (where, got)


def test_page_and_demo_read_without_overlapping_text_at_1280_and_390_px(dash_duo, tmp_path):
    from app import services_of
    from services.identity.roles import Role
    from services.identity.session import Identity

    app = _app(tmp_path)
    slug = publish_ward(services_of(app), Identity("olga", Role.OWNER, True), title=TITLE)
    path = f"/views/{slug}"
    dash_duo.start_server(app, navigate=False, port=_free_port())
    driver, base = dash_duo.driver, dash_duo.server.url.rstrip("/")
    _sign_in(dash_duo, base, "tina")
    for name, (width, height) in SIZES.items():
        driver.set_window_size(width, height)
        if name == "phone":   # the desktop demo, still open, follows the window down
            time.sleep(1)
            sizes = driver.execute_script(
                "return [...document.querySelectorAll('.demo-graph .js-plotly-plot')]"
                ".map(g => g.layout.font.size)")
            assert sizes and set(sizes) == {12}, sizes
            _no_text_problems(driver, [".demo-bar", ".demo-slide.active", ".demo-total"],
                              "demo resized to a phone")
        _open_page(dash_duo, base, path, 2)
        inner = driver.execute_script("return window.innerWidth")
        assert driver.execute_script(
            "return document.documentElement.scrollWidth") <= inner, name
        cohort = dash_duo.find_element(f"#{ids.VIEW_COHORT}").rect
        methods = dash_duo.find_element(f"#{ids.VIEW_METHODS}").rect
        if name == "phone":   # stacked, each as wide as the screen allows
            assert methods["y"] >= cohort["y"] + cohort["height"], (cohort, methods)
            assert cohort["width"] > 0.8 * inner
        else:                 # side by side
            assert abs(methods["y"] - cohort["y"]) < 2 and methods["x"] > cohort["x"]
        widths = driver.execute_script(
            "return [...document.querySelectorAll('.published-figure .js-plotly-plot')]"
            ".map(g => g.getBoundingClientRect().right)")
        assert widths and max(widths) <= inner, (name, widths)
        _no_text_problems(driver, [f"#{ids.VIEW_PAGE}"], f"page at {name}")
        if name == "phone":   # the drawn histogram, with its note on small counts
            driver.execute_script(
                "const card = document.querySelectorAll('.published-figure')[2];"
                "window.scrollTo(0, card.getBoundingClientRect().top + window.scrollY - 8);")
            time.sleep(1)
            driver.save_screenshot(str(DOCS / "published-view-phone.png"))

        deck = _open_demo(dash_duo, base, path, 2)
        count = len(driver.find_elements(By.CSS_SELECTOR, ".demo-slide"))
        assert count == 4          # the cohort, then the three figures
        for n in range(count):
            assert driver.find_element(By.CSS_SELECTOR, ".demo-counter").text == \
                f"{n + 1} / {count}"
            time.sleep(0.3)        # the slide's chart is resized when it is shown
            _no_text_problems(driver, [".demo-bar", ".demo-slide.active", ".demo-total"],
                              f"demo slide {n + 1} at {name}")
            if name == "desktop" and n == 2:
                driver.save_screenshot(str(DOCS / "demo-mode.png"))
            deck.send_keys(Keys.ARROW_RIGHT)
    assert _severe(dash_duo.get_logs() or []) == []
