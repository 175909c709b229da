"""A real headless browser for tests: Debian's chromium, driven by selenium through chromedriver.

Both paths are given explicitly, so Selenium Manager never runs and nothing is downloaded. Where
chromium is not installed the browser tests skip, unless `AMBER_REQUIRE_BROWSER` is set (CI sets
it in `.ci/run`, which also installs the packages), where they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REQUIRE_BROWSER_ENV = "AMBER_REQUIRE_BROWSER"
PAGE_LOAD_TIMEOUT_S = 15


def chromium_options() -> Options:
    """Headless chromium as root in a container: no sandbox, no GPU, no /dev/shm."""
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1024,768",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        # Tests talk to loopback only: keep the browser's own background traffic off the network.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--disable-sync",
        "--no-pings",
    ):
        options.add_argument(argument)
    return options


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless chromium per test module (starting one takes about a second)."""
    if not CHROMIUM.exists():
        install = "apt-get install -y --no-install-recommends chromium chromium-driver"
        if not os.environ.get(REQUIRE_BROWSER_ENV):
            pytest.skip(
                f"{CHROMIUM} is not installed ({install}); "
                f"set {REQUIRE_BROWSER_ENV}=1 to fail instead of skipping"
            )
        pytest.fail(f"{REQUIRE_BROWSER_ENV} is set but {CHROMIUM} is missing: {install}")
    driver = webdriver.Chrome(
        options=chromium_options(), service=Service(executable_path=str(CHROMEDRIVER))
    )
    driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()
