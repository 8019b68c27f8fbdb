"""report.html in headless Chromium at 1400x900: the answer on the first screen, every figure
loaded, no console errors (skips, saying why, where Chromium is not installed)."""

import pytest

from browser import chromium, console_errors, on_first_screen, save_screenshot
from contract.slo import SLO
from reports.report import ReportOptions, write_report
from lab.reports.synthetic import write_synthetic_run

pytestmark = pytest.mark.slow  # starts a browser


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run_dir = write_synthetic_run(tmp_path_factory.mktemp("run"), records=3000,
                                  strategies=("none", "static", "continuous"), concurrencies=(1, 4, 8, 16))
    return write_report(run_dir, ReportOptions(slo=SLO(ttft_ms=100, tpot_ms=10), replications=2))


@pytest.mark.e2e
def test_the_answer_is_on_the_first_screen_and_every_figure_loads(report):
    from selenium.webdriver.common.by import By

    with chromium(1400, 900) as driver:
        driver.get(report.html_path.as_uri())
        heading = driver.find_element(By.XPATH, "//h2[1]")
        assert heading.text == "Answer" and on_first_screen(driver, heading)
        sentence = driver.find_element(By.XPATH, "//h2[1]/following-sibling::p[1]")
        assert " batching sustains " in sentence.text and "req/s" in sentence.text
        assert on_first_screen(driver, sentence)
        figure = driver.find_element(By.XPATH, "//h2[1]/following-sibling::figure[1]/img")
        assert figure.get_attribute("data-file") == "throughput_vs_latency.png"
        assert driver.execute_script("return arguments[0].getBoundingClientRect().top", figure) < 900
        widths = driver.execute_script("return Array.from(document.images, i => [i.dataset.file, i.naturalWidth])")
        assert len(widths) == len(report.figures) and all(width > 0 for _, width in widths), widths
        # the long tables wait behind <details>: closed, so the first screen is not a table of levels
        closed = driver.execute_script("return Array.from(document.querySelectorAll('details'), d => d.open)")
        assert closed and not any(closed)
        assert console_errors(driver) == []
        save_screenshot(driver, "report-synthetic-first-screen.png")
