"""The Release page in a real headless Chromium (issue 15): the owner chooses techniques, runs,
sees metrics and plots, auto-tunes, and downloads the DP CSV and both reports (the files on
disk are read back); then makes a synthetic copy, sees its progress bar, then the result and
the side-by-side comparison, and downloads the synthetic CSV."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from layouts import ids
from tests.e2e.test_explore_browser import DOCS, _click, _free_port

pytestmark = pytest.mark.e2e
PLOTS = ".studio-results .js-plotly-plot"


def _pm(kind: str, column: str) -> str:
    """The DOM id Dash gives a pattern-matching id (keys sorted, no spaces)."""
    return json.dumps({"index": column, "type": kind}, separators=(",", ":"), sort_keys=True)


def _select(driver, element_id: str, value: str) -> None:
    element = driver.execute_script("return document.getElementById(arguments[0]);", element_id)
    Select(element).select_by_value(value)


def _file(folder: Path, suffix: str, timeout: float = 30) -> Path:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = [p for p in folder.glob(f"*{suffix}") if p.stat().st_size > 0]
        if done:
            return done[0]
        time.sleep(0.2)
    raise AssertionError(f"no *{suffix} was downloaded to {folder}")


def test_owner_runs_tunes_and_downloads_a_per_record_copy(dash_duo, tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path / "var"}, seed=11)
    services_of(app).studio.synthetic_iters = 50      # post-processing only: keep it quick
    dash_duo.start_server(app, navigate=False, port=_free_port())
    driver, base = dash_duo.driver, dash_duo.server.url.rstrip("/")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver.execute_cdp_cmd("Page.setDownloadBehavior",
                           {"behavior": "allow", "downloadPath": str(downloads)})
    driver.get(base + "/release")
    dash_duo.wait_for_element(f"#{ids.ST_RUN}", timeout=30)

    # choose techniques: Laplace with sensitivity 1 for the lesions, drop the patient id
    _select(driver, _pm(ids.ST_TECH, "Number_of_Lesions"), "laplace")
    _select(driver, _pm(ids.ST_SENS, "Number_of_Lesions"), "one")
    _select(driver, _pm(ids.ST_TECH, "Anonym_ID"), "drop")
    _select(driver, ids.ST_TARGET, "BPH")
    _click(dash_duo, f"#{ids.ST_RUN}")
    dash_duo.wait_for_contains_text(f"#{ids.ST_RESULTS}", "Privacy Match %", timeout=90)
    dash_duo.wait_for_contains_text(f"#{ids.ST_RESULTS}", "Model check", timeout=10)
    types = json.loads(driver.execute_script(
        "return JSON.stringify([...document.querySelectorAll(arguments[0])]"
        ".map(g => (g.data || []).map(t => t.type)).flat());", PLOTS))
    assert {"bar", "box", "pie", "heatmap"} <= set(types)
    n_graphs = len(driver.find_elements(By.CSS_SELECTOR, PLOTS))
    assert len(driver.find_elements(By.CSS_SELECTOR, ".studio-results caption")) >= n_graphs
    # a poll in flight when the job ended may draw the same results once more: read the
    # verdict by waiting on it (a re-drawn element is found again)
    dash_duo.wait_for_contains_text(".studio-verdict.passed", "Per-record copy made",
                                    timeout=10)

    # downloads: the DP CSV (no dropped column, every row) and the two reports
    _click(dash_duo, f"#{ids.ST_DL_CSV}")
    frame = pd.read_csv(_file(downloads, ".csv"))
    assert "Anonym_ID" not in frame.columns and len(frame) == 920
    assert frame["Age"].between(20, 100).all()
    _click(dash_duo, f"#{ids.ST_DL_JSON}")
    rep = json.loads(_file(downloads, ".json").read_text())
    lesions = next(c for c in rep["columns"] if c["column"] == "Number_of_Lesions")
    assert lesions["technique"] == "laplace" and lesions["sensitivity"] == 1.0
    assert rep["central_dp"] is False and rep["model_check"]["target"] == "BPH"
    _click(dash_duo, f"#{ids.ST_DL_HTML}")
    assert "Release report" in _file(downloads, ".html").read_text()

    # auto-tune: a KS tolerance of 0 is never met, so it stops on the budget with its trail.
    # The job is held after its first try until the page has drawn that stage: the bar shows
    # where the job is, not "waiting"
    studio = services_of(app).studio
    real_run, first_try_drawn = studio.run, threading.Event()

    def held_run(*args, **kwargs):
        out = real_run(*args, **kwargs)
        if kwargs.get("stage", "").startswith("Auto-tune try 1"):
            first_try_drawn.wait(timeout=60)
        return out

    studio.run = held_run
    ks = driver.find_element(By.ID, ids.ST_TOL_KS)
    ks.clear()
    ks.send_keys("0")
    _click(dash_duo, f"#{ids.ST_TUNE}")
    dash_duo.wait_for_contains_text(f"#{ids.ST_PROGRESS}", "measuring privacy and utility",
                                    timeout=60)
    bar = driver.find_element(By.CSS_SELECTOR, f"#{ids.ST_PROGRESS} [role=progressbar]")
    assert bar.get_attribute("aria-valuetext").startswith("Auto-tune try 1 (")
    assert 0 < int(bar.get_attribute("aria-valuenow")) < 100
    first_try_drawn.set()
    dash_duo.wait_for_contains_text(f"#{ids.ST_TRAIL}", "Auto-tune trail", timeout=120)
    rows = driver.find_elements(By.CSS_SELECTOR, f"#{ids.ST_TRAIL} tbody tr")
    assert len(rows) >= 1 and "budget" in driver.find_element(By.ID, ids.ST_TRAIL).text
    # a failure: red, one line naming the tolerance it missed; its files held back until
    # the owner ticks "download anyway" (recorded)
    dash_duo.wait_for_contains_text(".studio-verdict.failed", "(tolerance ≤ 0)", timeout=30)
    time.sleep(1)      # any poll in flight when the job ended has drawn by now
    verdict = driver.find_element(By.CSS_SELECTOR, ".studio-verdict.failed")
    assert "alert-danger" in verdict.get_attribute("class")
    assert verdict.text.startswith("Auto-tune failed") and "KS distance" in verdict.text
    assert not driver.find_elements(By.CSS_SELECTOR, ".studio-verdict.passed")
    assert all(not driver.find_element(By.ID, b).is_enabled()
               for b in (ids.ST_DL_CSV, ids.ST_DL_JSON, ids.ST_DL_HTML))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", verdict)
    time.sleep(0.5)    # let the plots settle before the screenshot
    driver.save_screenshot(str(DOCS / "release-studio.png"))
    insist = driver.find_element(By.ID, ids.ST_INSIST_BOX)
    assert insist.is_displayed()
    deliveries = len(services_of(app).ledger.deliveries())
    insist.find_element(By.CSS_SELECTOR, "label").click()
    dash_duo.wait_for_contains_text(f"#{ids.ST_MESSAGE}", "Recorded", timeout=20)
    assert driver.find_element(By.ID, ids.ST_DL_CSV).is_enabled()
    assert len(services_of(app).ledger.deliveries()) == deliveries + 1

    # the synthetic copy: a progress bar while it works, then n̂, ε charged, tree, figures
    eps = driver.find_element(By.ID, ids.ST_SYN_EPS)
    eps.clear()
    eps.send_keys("2")
    dash_duo.wait_for_text_to_equal(f"#{ids.ST_SYN_RUN}", "Make synthetic copy (ε 2)",
                                    timeout=10)
    _click(dash_duo, f"#{ids.ST_SYN_RUN}")
    dash_duo.wait_for_element(f"#{ids.ST_SYN_PROGRESS} [role=progressbar][aria-label]",
                              timeout=20)
    dash_duo.wait_for_contains_text(f"#{ids.ST_SYN_RESULTS}", "ε charged", timeout=180)
    text = driver.find_element(By.ID, ids.ST_SYN_RESULTS).text
    assert "n̂ =" in text and "Side by side" in text and "per-record" in text
    assert not driver.find_elements(By.CSS_SELECTOR, f"#{ids.ST_SYN_PROGRESS} *")
    graphs = driver.find_elements(By.CSS_SELECTOR, f"#{ids.ST_SYN_RESULTS} .js-plotly-plot")
    assert graphs and len(driver.find_elements(
        By.CSS_SELECTOR, f"#{ids.ST_SYN_RESULTS} caption")) >= len(graphs)
    # the whole page with both results drawn: no serious or critical axe violation, Plotly's
    # own modebar aside (app.css makes its buttons 24 px, but on these stacked charts axe
    # still finds one partly covered, by 3 px: a known gap, see the closing note)
    from tests.e2e.test_accessibility_browser import AXE_TAGS, BLOCKING, _axe_source

    driver.set_script_timeout(120)
    driver.execute_script(_axe_source())
    found = json.loads(driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run({exclude: [['.modebar']]}, {runOnly: {type: 'tag', values: arguments[0]}})"
        ".then(r => done(JSON.stringify(r.violations)), e => done(String(e)));", AXE_TAGS))
    assert [f"{v['id']}: {[n['target'] for n in v['nodes'][:3]]}" for v in found
            if v["impact"] in BLOCKING] == []
    for old in downloads.glob("*.csv"):
        old.unlink()
    _click(dash_duo, f"#{ids.ST_SYN_DL_CSV}")
    synthetic = pd.read_csv(_file(downloads, ".csv"))
    assert "Anonym_ID" not in synthetic.columns
    assert synthetic["Age"].dropna().between(20, 100).all()
