"""Headless Chromium for the browser tests, driven by Selenium through Debian's chromedriver.

    with chromium(width=1400, height=900) as driver: ...     (pytest.skip with the reason when absent)

Debian's packages (`apt-get install chromium chromium-driver`; `make test` installs them when it
runs as root with apt-get) put the browser and its driver on PATH; Selenium is given both paths,
so it never looks for (or downloads) a driver of its own. The viewport is set through the
DevTools protocol to exactly width x height CSS pixels, so "the first screen" is that size.
With SERVECAP_SCREENSHOTS=DIR the tests also save what they looked at there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _executables() -> tuple[str, str] | str:
    """(browser, driver) paths, or the reason they cannot be used."""
    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    driver = shutil.which("chromedriver") or next(
        (str(p) for p in (Path("/usr/bin/chromedriver"), Path("/usr/lib/chromium/chromedriver")) if p.exists()), None)
    if browser is None:
        return "Chromium is not installed (apt-get install chromium chromium-driver; `make test` does it as root)"
    if driver is None:
        return "chromedriver is not installed (apt-get install chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (it is in the dev extras: pip install -e '.[dev]')"
    return browser, driver


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 900):
    found = _executables()
    if isinstance(found, str):
        pytest.skip(found)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = found
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """The page's console messages at level SEVERE (errors, failed loads) since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def on_first_screen(driver, element) -> bool:
    """The element's box lies wholly inside the viewport as the page first shows."""
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;",
        element)


def save_screenshot(driver, name: str) -> None:
    """The viewport as DIR/name when SERVECAP_SCREENSHOTS=DIR is set (for people to look at)."""
    folder = os.environ.get("SERVECAP_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))
