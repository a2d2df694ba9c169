"""Preview, then release, in a real Chromium (issue 11's must-show): a collaborator changes
four controls and spends nothing, releases for exactly the ε shown, reopens it free from My
releases, and downloads a CSV and a report whose numbers are the figure's."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from pathlib import Path

import pytest
from dash.testing.wait import until

from layouts import ids
from layouts.components.figures import fmt
from services.identity.roles import Role
from tests.e2e.test_explore_browser import (
    DOCS,
    GRAPH,
    _click,
    _data,
    _free_port,
    _severe,
    _wait_change,
)

pytestmark = pytest.mark.e2e


def _spent(services) -> float:
    return services.ledger.status(role=Role.COLLABORATOR, dataset_id="pirads",
                                  user="test-collaborator").role.spent


def _pick(dash_duo, dropdown_id: str, index: int) -> None:
    """Open a dropdown scrolled to the middle, then activate option ``index`` (a JS click:
    the menu's search box may overlap the first option)."""
    options = ".dash-dropdown-options .dash-dropdown-option"
    el = dash_duo.find_element(f"#{dropdown_id}")
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", el)
    time.sleep(0.3)                   # let a smooth scroll settle before clicking
    opener = el.find_elements("css selector", "button") or [el]
    dash_duo.driver.execute_script("arguments[0].click();", opener[0])
    dash_duo.wait_for_element(options, timeout=10)
    dash_duo.driver.execute_script("arguments[0].click();",
                                   dash_duo.find_elements(options)[index])
    dash_duo.wait_for_no_elements(options, timeout=10)


def _wait_file(folder: Path, suffix: str, timeout: float = 20) -> Path:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = [p for p in folder.glob(f"*{suffix}") if p.stat().st_size > 0]
        if done:
            return done[0]
        time.sleep(0.2)
    raise AssertionError(f"no {suffix} downloaded")


def test_preview_then_release_reopen_free_and_export(dash_duo, tmp_path):
    from app import create_app, services_of
    from tests.app.conftest import SessionAs

    app = create_app({"data_dir": tmp_path / "data"}, seed=42)
    services = services_of(app)
    services.identity = SessionAs(Role.COLLABORATOR)
    dash_duo.start_server(app, port=_free_port())
    dash_duo.wait_for_element(f"#{ids.EX_PREVIEW_BANNER}", timeout=30)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    dash_duo.driver.execute_cdp_cmd("Page.setDownloadBehavior",
                                    {"behavior": "allow", "downloadPath": str(downloads)})

    # four control changes: each a free preview with its cost on the Release button
    before = _data(dash_duo)
    for control, index in ((ids.EX_VIEW, 1), (ids.EX_GROUP, 0), (ids.EX_VIEW, 3),
                           (ids.EX_GROUP, 2)):
        _pick(dash_duo, control, index)
        before = _wait_change(dash_duo, before)
        dash_duo.wait_for_element(f"#{ids.EX_PREVIEW_BANNER}", timeout=10)
        assert "simulated" in dash_duo.find_element(f"#{ids.EX_PREVIEW_BANNER}").text.lower()
        assert _spent(services) == 0.0
    # a grouping nobody priced: the button prices it first (its DP sizes, an exact ε 0.25
    # from the role's budget), then shows the view's exact price
    assert dash_duo.find_element(f"#{ids.EX_RELEASE}").text == "Price this grouping (ε 0.25)"
    _click(dash_duo, f"#{ids.EX_RELEASE}")
    until(lambda: dash_duo.find_element(f"#{ids.EX_RELEASE}").text.startswith("Release (ε"),
          timeout=30)
    assert _spent(services) == pytest.approx(0.25)
    before = _data(dash_duo)
    label = dash_duo.find_element(f"#{ids.EX_RELEASE}").text
    shown = re.search(r"Release \(ε ([0-9.]+)\)", label).group(1)
    dash_duo.driver.execute_script("window.scrollTo(0, 0); document.activeElement.blur();")
    time.sleep(0.3)
    dash_duo.driver.save_screenshot(str(DOCS / "explore-preview.png"))

    # Release spends exactly the ε shown (at the 3 digits shown; the ledger keeps the quote)
    _click(dash_duo, f"#{ids.EX_RELEASE}")
    released = _wait_change(dash_duo, before)
    dash_duo.wait_for_no_elements(f"#{ids.EX_PREVIEW_BANNER}", timeout=10)
    spent = _spent(services)
    assert spent > 0.25 and fmt(spent - 0.25) == shown
    rel, _sizes = services.ledger.releases(dataset_id="pirads")      # newest first
    assert rel.epsilon == pytest.approx(spent - 0.25)

    # another control: a preview again; then reopen from My releases, free
    _pick(dash_duo, ids.EX_VIEW, 1)
    _wait_change(dash_duo, released)
    _click(dash_duo, f"#{ids.EX_REOPEN} input[value='{rel.id}']")
    end = time.monotonic() + 20
    while _data(dash_duo) != released and time.monotonic() < end:
        time.sleep(0.2)
    assert _data(dash_duo) == released
    assert _spent(services) == spent

    # exports: the CSV's and the report's numbers are the figure's
    bars = json.loads(released)[0]
    _click(dash_duo, f"button[id*='{ids.EX_CSV}']")
    rows = list(csv.DictReader(io.StringIO(_wait_file(downloads, ".csv").read_text())))
    _click(dash_duo, f"button[id*='{ids.EX_REPORT}']")
    report = json.loads(_wait_file(downloads, ".json").read_text())
    assert [r["group"] for r in rows] == bars["y"]
    assert [float(r["value"]) for r in rows] == pytest.approx(bars["x"], rel=1e-12)
    assert [v["value"] for v in report["values"]] == pytest.approx(bars["x"], rel=1e-12)
    assert report["epsilon"] == pytest.approx(rel.epsilon) and report["release_id"] == rel.id
    assert _spent(services) == spent
    assert dash_duo.find_elements(GRAPH)
    assert _severe(dash_duo.get_logs()) == []
