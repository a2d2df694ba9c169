"""The Data page in Chromium: an upload asks, column by column, before anything is public."""

from __future__ import annotations

import pytest

from layouts import ids
from services.identity.roles import Role
from tests.app.test_schema_proposal import gleason_2_to_10, ward_table
from tests.e2e.test_explore_browser import DOCS, _free_port, _severe

pytestmark = pytest.mark.e2e


def test_an_upload_shows_clamp_counts_and_asks_per_column(dash_duo, tmp_path):
    from app import create_app, services_of
    from tests.app.conftest import SessionAs

    app = create_app({"data_dir": tmp_path / "app"}, seed=5)
    services_of(app).identity = SessionAs(Role.OWNER)
    dash_duo.start_server(app, port=_free_port())
    dash_duo.driver.set_window_size(1400, 1100)
    dash_duo.driver.get(dash_duo.server_url + "/data")
    dash_duo.wait_for_element(f"#{ids.DATA_UPLOAD}", timeout=30)

    table = gleason_2_to_10().assign(ward=ward_table()["ward"].iloc[:146].tolist()
                                     + ["cardio"] * 60)
    path = tmp_path / "biopsies.csv"
    table.to_csv(path, index=False)
    dash_duo.find_element(f"#{ids.DATA_UPLOAD} input[type=file]").send_keys(str(path))

    dash_duo.wait_for_contains_text(f"#{ids.DATA_MESSAGE}", "Loaded 'biopsies.csv'", timeout=30)
    dash_duo.wait_for_contains_text(f"#{ids.DATA_TABLE}", "would clamp 43 of 146", timeout=30)
    text = dash_duo.find_element(f"#{ids.DATA_TABLE}").text
    assert "awaiting your confirmation" in text and "Rare levels" in text
    dash_duo.find_element(f"#{ids.DATA_CONFIRM}").click()
    dash_duo.wait_for_contains_text(f"#{ids.DATA_MESSAGE}", "one by one", timeout=30)
    assert not services_of(app).registry.get("biopsies").schema.confirmed
    dash_duo.driver.execute_script(
        "document.getElementById(arguments[0]).scrollIntoView();", ids.DATA_PATIENT)
    dash_duo.driver.save_screenshot(str(DOCS / "data-review.png"))
    assert _severe(dash_duo.get_logs()) == []
