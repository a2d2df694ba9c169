"""The Explore page in a real headless Chromium (dash[testing]); screenshots go to docs/."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from dash.testing.wait import until

from layouts import ids
from services.identity.roles import Role

pytestmark = pytest.mark.e2e
DOCS = Path(__file__).resolve().parents[2] / "docs"
GRAPH = ".dp-graph .js-plotly-plot"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(dash_duo, tmp_path, role: Role = Role.OWNER):
    from app import create_app, services_of
    from tests.app.conftest import SessionAs

    app = create_app({"data_dir": tmp_path}, seed=42)
    if role is not Role.OWNER:
        services_of(app).identity = SessionAs(role)
    dash_duo.start_server(app, port=_free_port())
    dash_duo.wait_for_element(GRAPH, timeout=30)
    return app


def _data(dash_duo, index: int = 0) -> str:
    """The plotted data as JSON (Plotly 7 ships arrays base64-encoded: read it in JS)."""
    return dash_duo.driver.execute_script(
        "const g = document.querySelectorAll(arguments[0])[arguments[1]];"
        "return g ? JSON.stringify(g.data) : null;", GRAPH, index)


def _trace_types(dash_duo) -> set[str]:
    return {t.get("type") for t in json.loads(_data(dash_duo) or "[]")}


def _title(dash_duo) -> str:
    return dash_duo.driver.execute_script(
        "const g = document.querySelector(arguments[0]);"
        "return g && g.layout.title ? g.layout.title.text : '';", GRAPH)


def _text(dash_duo, element_id: str) -> str:
    return dash_duo.find_element(f"#{element_id}").text


def _wait_change(dash_duo, before: str, timeout: float = 20) -> str:
    dash_duo.wait_for_element(GRAPH, timeout=timeout)
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        now = _data(dash_duo)
        if now and now != before:
            return now
        time.sleep(0.2)
    raise AssertionError("the figure did not change")


def _choose(dash_duo, dropdown_id: str, index: int) -> None:
    """Open a Dash 4 dropdown and click its option ``index`` (waits for the menu)."""
    options = ".dash-dropdown-options .dash-dropdown-option"
    if not dash_duo.find_elements(options):
        dash_duo.find_element(f"#{dropdown_id}").click()
    dash_duo.wait_for_element(options, timeout=10)
    dash_duo.find_elements(options)[index].click()
    dash_duo.wait_for_no_elements(options, timeout=10)


def _choose_figure(dash_duo, key: str) -> None:
    """Choose a paper preset by its label ("Fig. 4 — …"): the open list may show the chosen
    option first, so an index is not a figure."""
    options = ".dash-dropdown-options .dash-dropdown-option"
    if not dash_duo.find_elements(options):
        _click(dash_duo, f"#{ids.EX_PRESET}")
    dash_duo.wait_for_element(options, timeout=10)
    label = f"Fig. {key[-1]} "
    match = [o for o in dash_duo.find_elements(options) if o.text.startswith(label)]
    assert match, [o.text for o in dash_duo.find_elements(options)]
    match[0].click()
    dash_duo.wait_for_no_elements(options, timeout=10)


def _click(dash_duo, selector: str) -> None:
    """Click like a keyboard user would activate it (scrolled into view first)."""
    el = dash_duo.find_element(selector)
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", el)
    dash_duo.driver.execute_script("arguments[0].click();", el)


def _release(dash_duo) -> None:
    """Press Release; a view not priced yet is priced by the first press, then released."""
    button = f"#{ids.EX_RELEASE}"
    if dash_duo.find_element(button).text.startswith("Price"):
        _click(dash_duo, button)
        until(lambda: dash_duo.find_element(button).text.startswith("Release (ε"), timeout=30)
    _click(dash_duo, button)


def _severe(logs: list[dict]) -> list[dict]:
    return [e for e in logs if e.get("level") == "SEVERE"]


def test_page_loads_and_each_preset_renders_its_figure(dash_duo, tmp_path):
    _start(dash_duo, tmp_path)
    assert _severe(dash_duo.get_logs()) == []
    expected = {"fig3": {"bar"}, "fig4": {"box", "scatter"}, "fig5": {"bar"}, "fig2": {"bar"}}
    before = _data(dash_duo)
    for key, types in expected.items():
        dash_duo.driver.execute_script("window.scrollTo(0, 0);")
        _choose_figure(dash_duo, key)
        before = _wait_change(dash_duo, before)
        until(lambda: dash_duo.find_element(f"#{ids.EX_RELEASE}").text.startswith(
            ("Price this grouping", "Released")), timeout=20)
        if dash_duo.find_element(f"#{ids.EX_RELEASE}").text.startswith("Price"):
            # a grouping nobody priced yet: the preset says so, the button prices it first
            dash_duo.wait_for_contains_text(f"#{ids.EX_MESSAGE}", "priced first", timeout=10)
            _release(dash_duo)                                # prices, then spends
            until(lambda: dash_duo.find_element(f"#{ids.EX_RELEASE}").text.startswith(
                "Released"), timeout=60)                     # its answer is on screen
            dash_duo.driver.execute_script("window.scrollTo(0, 0);")
        before = _data(dash_duo)
        dash_duo.wait_for_text_to_equal(f"#{ids.EX_MESSAGE}", "", timeout=10)
        assert _trace_types(dash_duo) == types, key
        wide = dash_duo.driver.execute_script(   # the panel's tables scroll in their box
            "return [document.documentElement.scrollWidth,"
            " document.documentElement.clientWidth];")
        assert wide[0] <= wide[1], (key, wide)
        dash_duo.driver.save_screenshot(str(DOCS / f"{key}.png"))
        if key == "fig5":                                      # Fig. 5 is at high noise
            assert "10–20 %" in _text(dash_duo, ids.PANEL_BAND)
    assert _severe(dash_duo.get_logs()) == []


def test_changing_role_changes_epsilon_band_and_figure(dash_duo, tmp_path):
    _start(dash_duo, tmp_path)
    preview = _data(dash_duo)                           # the page opens on a free preview
    _release(dash_duo)
    _wait_change(dash_duo, preview)      # read before the press: the answer can come first
    dash_duo.wait_for_contains_text(f"#{ids.EX_PANEL}", "Realized noise", timeout=20)
    owner_fig, owner_eps = _data(dash_duo), _text(dash_duo, ids.PANEL_EPSILON)
    assert "0–5 %" in _text(dash_duo, ids.PANEL_BAND)
    assert "Realized noise" in dash_duo.find_element(f"#{ids.EX_PANEL}").text
    _click(dash_duo, f"#{ids.EX_ROLE} input[value='collaborator']")
    collab_fig = _wait_change(dash_duo, owner_fig)
    dash_duo.wait_for_contains_text(f"#{ids.PANEL_BAND}", "5–10 %", timeout=10)
    collab_eps = _text(dash_duo, ids.PANEL_EPSILON)
    assert float(collab_eps) < float(owner_eps)
    assert collab_fig != owner_fig
    # the side panel's ε is the one the figure is labelled with
    assert re.search(rf"ε = {re.escape(collab_eps)}\b", _title(dash_duo))


def test_compare_mode_shows_three_panels(dash_duo, tmp_path):
    _start(dash_duo, tmp_path)
    _click(dash_duo, f"#{ids.EX_COMPARE}")
    dash_duo.wait_for_element(f"{GRAPH}", timeout=20)
    import time

    end = time.monotonic() + 20
    while time.monotonic() < end and len(dash_duo.find_elements(GRAPH)) != 3:
        time.sleep(0.2)
    assert len(dash_duo.find_elements(GRAPH)) == 3
    titles = dash_duo.driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(g => g.layout.title.text);",
        GRAPH)
    assert [("low" in t, "medium" in t, "high" in t) for t in titles] == [
        (True, False, False), (False, True, False), (False, False, True)]
    ranges = dash_duo.driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(g => g.layout.yaxis.range);",
        GRAPH)
    assert ranges[0] == ranges[1] == ranges[2], ranges                 # one scale
    # compact: the panel right under the tiles (not under the tall controls column), and
    # no legend, title or caption text over another
    gap = dash_duo.driver.execute_script(
        "const g = document.querySelector('.graphs-col').getBoundingClientRect();"
        "const p = document.querySelector('.panel-col').getBoundingClientRect();"
        "return [p.top - g.bottom, p.left - g.left];")
    assert 0 <= gap[0] < 48 and abs(gap[1]) < 2, gap
    from tests.e2e.layout_checks import text_problems

    tiles = text_problems(dash_duo.driver, [f"#{ids.EX_GRAPHS} .dp-graph"])
    assert [o for o in tiles["overlaps"] if "PREVIEW" not in o] == [], tiles["overlaps"]
    dash_duo.driver.execute_script(
        "document.activeElement.blur(); window.scrollTo(0, 0);"
        "document.documentElement.scrollTop = 0;")
    time.sleep(0.5)
    dash_duo.driver.save_screenshot(str(DOCS / "compare.png"))


def test_paper_mode_is_absent_for_a_third_party(dash_duo, tmp_path):
    _start(dash_duo, tmp_path, Role.THIRD_PARTY)
    page = dash_duo.find_element(f"#{ids.PAGE}").text
    assert "Paper (PyDPLib)" not in page
    options = dash_duo.find_elements(f"#{ids.EX_ROLE} input")
    assert [o.get_attribute("value") for o in options] == ["third_party"]
    assert "Realized" not in dash_duo.find_element(f"#{ids.EX_PANEL}").text
    dash_duo.driver.set_window_size(390, 844)
    dash_duo.driver.save_screenshot(str(DOCS / "phone-third-party.png"))
    assert _severe(dash_duo.get_logs()) == []


RECT_JS = """
const rect = s => { const e = document.querySelector(s);
  if (!e) { return null; } const r = e.getBoundingClientRect();
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
return {release: rect(arguments[0]), chart: rect(arguments[1]), title: rect(arguments[2]),
        width: document.documentElement.clientWidth, height: window.innerHeight,
        scrolled: window.scrollY, page: document.documentElement.scrollWidth};
"""


def _viewport(driver, width: int, height: int) -> None:
    """The page's viewport set to exactly ``width`` × ``height`` CSS px (a phone emulated
    as one: its viewport meta applies), whatever the headless window's chrome takes."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def _inside(box: dict, width: float, height: float) -> bool:
    return (box is not None and box["left"] >= 0 and box["top"] >= 0
            and box["right"] <= width + 0.5 and box["bottom"] <= height + 0.5)


@pytest.mark.parametrize(("width", "height", "shot"), [(1400, 1000, "explore-desktop.png"),
                                                       (390, 844, "explore-phone.png")])
def test_release_button_and_chart_open_the_page_without_scrolling(dash_duo, tmp_path, width,
                                                                  height, shot):
    """Issue 23: the price (Release button) and the whole chart are on the first screen at
    1400 × 1000 and on a 390 px phone, the chart and its title no wider than the screen."""
    from tests.e2e.layout_checks import text_problems

    _viewport(dash_duo.driver, width, height)
    _start(dash_duo, tmp_path)
    until(lambda: dash_duo.find_element(f"#{ids.EX_RELEASE}").text.startswith(
        ("Price", "Release")), timeout=60)
    title = f"{GRAPH} .g-gtitle"
    dash_duo.wait_for_element(title, timeout=30)
    dash_duo.driver.execute_script("window.scrollTo(0, 0);")
    # the title is fitted to the chart after it is drawn: wait until it is inside it
    until(lambda: _inside(dash_duo.driver.execute_script(RECT_JS, f"#{ids.EX_RELEASE}", GRAPH,
                                                         title)["title"], width, height),
          timeout=30)
    got = dash_duo.driver.execute_script(RECT_JS, f"#{ids.EX_RELEASE}", GRAPH, title)
    assert got["scrolled"] == 0 and got["height"] == height, got
    view = (got["width"], got["height"])
    assert _inside(got["release"], *view), got
    assert _inside(got["chart"], *view), got
    assert got["chart"]["bottom"] - got["chart"]["top"] > 300, got     # a chart, not a strip
    assert got["page"] <= got["width"], got                             # nothing scrolls sideways
    chart = text_problems(dash_duo.driver, [f"#{ids.EX_GRAPHS} .dp-graph"])
    assert [c for c in chart["cut"] if "PREVIEW" not in c] == [], chart["cut"]
    assert [o for o in chart["overlaps"] if "PREVIEW" not in o] == [], chart["overlaps"]
    dash_duo.driver.save_screenshot(str(DOCS / shot))
