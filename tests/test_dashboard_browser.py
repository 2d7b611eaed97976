"""The dashboard in a real headless Chromium, served by a real ``xe2tune serve`` process.

Needs Debian's ``chromium`` and ``chromium-driver`` (``apt-get install -y chromium
chromium-driver``; ``.ci/run`` installs them) and the ``selenium`` package. The browser is never
downloaded: selenium is pointed at /usr/bin/chromium and /usr/bin/chromedriver.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _api_fixtures import (
    DEVICE_A,
    PROBLEMS_A,
    FilledDb,
    fill_database,
    launcher_config,
    ok_result,
    running_server,
    xe2tune_command,
)

from xe2tune.db import open_store

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,2200")

pytestmark = [
    pytest.mark.slow,  # a server process, a browser and a report: about a minute
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="Debian chromium and chromium-driver are not installed "
               "(apt-get install -y chromium chromium-driver)",
    ),
]

# Markers actually drawn as SVG paths, per roofline chart, for the traces of measured configs.
COUNT_POINTS = """
const counts = {};
for (const chart of document.querySelectorAll('#rooflines .roofline')) {
  let drawn = 0;
  for (const trace of chart._fullData) {
    if (trace.meta === 'measured') {
      drawn += chart.querySelectorAll('g.trace' + trace.uid + ' path.point').length;
    }
  }
  counts[chart.dataset.device] = drawn;
}
return counts;
"""


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> FilledDb:
    # Its own database: the test writes into it while the page is open.
    return fill_database(str(tmp_path_factory.mktemp("browser") / "dashboard.db"))


@pytest.fixture(scope="module")
def server(filled: FilledDb, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with running_server(filled.url, log) as base:
        yield base


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)),
                              options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, condition, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition(driver)
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _severe(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def test_dashboard_draws_every_measurement_without_console_errors(server: str, browser,
                                                                  filled: FilledDb):
    browser.get(f"{server}/")
    _wait(browser, lambda d: d.execute_script("return window.xe2tReady === true"),
          what="the dashboard's first draw")
    counts = browser.execute_script(COUNT_POINTS)
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
    assert counts == filled.ok_per_device
    assert sum(counts.values()) == filled.n_ok
    assert _severe(browser) == []


def test_best_table_sorts_and_filters(server: str, browser, filled: FilledDb):
    browser.get(f"{server}/")
    _wait(browser, lambda d: d.execute_script("return window.xe2tReady === true"),
          what="the dashboard's first draw")
    rows = ("return [...document.querySelectorAll('#best tbody tr')]"
            ".map(r => r.children[12].textContent)")
    assert len(browser.execute_script(rows)) == len(PROBLEMS_A) + 1
    browser.execute_script("document.querySelector('#best th[data-key=time_ms]').click()")
    times = [float(t) for t in browser.execute_script(rows)]
    assert times == sorted(times)
    browser.execute_script(
        "const s = document.querySelector('#filters select[name=dtype]');"
        "s.value = 'bf16'; s.dispatchEvent(new Event('change'));")
    assert len(browser.execute_script(rows)) == 2
    assert _severe(browser) == []


def test_study_views_draw_convergence_and_importance(server: str, browser, filled: FilledDb):
    browser.get(f"{server}/")
    _wait(browser, lambda d: d.execute_script("return window.xe2tReady === true"),
          what="the dashboard's first draw")
    options = browser.execute_script("return document.querySelectorAll('#study option').length")
    assert options == len(filled.study_ids)
    _wait(browser, lambda d: d.execute_script(
        "return document.querySelectorAll('#importance g.trace.bars').length > 0"),
        what="the parameter importance bars")
    assert browser.execute_script(
        "return document.querySelectorAll('#convergence g.trace.scatter').length") >= 2
    browser.save_screenshot(str(ARTIFACTS / "dashboard-studies.png"))
    assert _severe(browser) == []


def test_dashboard_refreshes_itself_while_results_arrive(server: str, browser,
                                                         filled: FilledDb):
    browser.get(f"{server}/")
    _wait(browser, lambda d: d.execute_script("return window.xe2tReady === true"),
          what="the dashboard's first draw")
    store = open_store(filled.url)
    try:
        device_id = next(d.id for d in store.devices() if d.name == DEVICE_A.name)
        study = next(s for s in store.studies() if s.device_id == device_id)
        config = launcher_config(study.problem.head_dim, 32, 32, 1, 2)
        store.record_trial(study.id, ok_result(study.problem, config, 0.2), number=99)
    finally:
        store.close()
    expected = {**filled.ok_per_device, DEVICE_A.name: filled.ok_per_device[DEVICE_A.name] + 1}
    _wait(browser, lambda d: d.execute_script(COUNT_POINTS) == expected, timeout=60,
          what="the new measurement to appear without a reload")
    assert _severe(browser) == []


def _ok_per_device(db_url: str) -> dict[str, int]:
    store = open_store(db_url)
    try:
        frame = store.results_frame()
    finally:
        store.close()
    return {str(k): int(v) for k, v in frame[frame["status"] == "ok"].groupby("device").size()
            .items()}


def test_report_is_one_offline_file_with_the_same_views(browser, filled: FilledDb,
                                                        tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    subprocess.run([xe2tune_command(), "report", "--out", str(out), "--db", filled.url],
                   check=True, timeout=600, capture_output=True)
    assert "<script src=" not in out.read_text(encoding="utf-8")
    browser.get(out.as_uri())
    _wait(browser, lambda d: d.execute_script("return window.xe2tReady === true"),
          what="the report's first draw")
    assert browser.execute_script(COUNT_POINTS) == _ok_per_device(filled.url)
    assert browser.execute_script(
        "return document.querySelectorAll('#importance g.trace.bars').length") > 0
    browser.save_screenshot(str(ARTIFACTS / "report.png"))
    assert _severe(browser) == []
