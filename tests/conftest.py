"""Shared pytest set-up: headless Chromium options for dash[testing] and the e2e gate."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Under CI the property tests are derandomized (the same examples every run), so a red CI
# always means a change broke something, never that a new random example was drawn today.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_setup_options():
    """Chrome options used by dash_duo: Debian's Chromium, headless, no network lookups."""
    from selenium.webdriver.chrome.options import Options

    options = Options()
    binary = shutil.which("chromium")
    if binary:
        options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,800",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}",
    ):
        options.add_argument(arg)
    return options


def pytest_collection_modifyitems(config, items):
    """Browser tests need Chromium and chromedriver; under CI they must run, never skip."""
    have_browser = bool(shutil.which("chromium") and shutil.which("chromedriver"))
    if have_browser:
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(
            "CI=true but chromium/chromedriver are missing: .ci/run must install them."
        )
    skip = pytest.mark.skip(
        reason="chromium and chromedriver are not installed "
        "(apt-get install chromium chromium-driver); .ci/run installs them"
    )
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)
