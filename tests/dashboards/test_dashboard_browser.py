"""The dashboard, the report and the API docs in a real headless Chromium, served by a real
``xe2tune serve`` process, asserted on what a person sees at 1366 px.

Needs Debian's ``chromium`` and ``chromium-driver`` (``apt-get install -y chromium
chromium-driver``; ``.ci/run`` installs them) and the ``selenium`` package. The browser is never
downloaded: selenium is pointed at /usr/bin/chromium and /usr/bin/chromedriver. Screenshots of
the dashboard, /docs, /redoc and the report are kept in ``test-artifacts/`` at the repository
root (gitignored).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _api_fixtures import (
    DEVICE_A,
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
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WIDTH = 1366
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", f"--window-size={WIDTH},1600")
# No name resolves except loopback: a page that needs a CDN or web fonts cannot get them.
OFFLINE_FLAGS = ("--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                 "--proxy-server=http://0.0.0.0:9", "--proxy-bypass-list=127.0.0.1")
BUDGET = 12  # roofline points per device on the page: below device A's 30, so it downsamples
# ReDoc's sidebar shows the Redocly logo from its CDN and hides it when it fails to load; it
# is the one request the offline docs make.
REDOC_ATTRIBUTION = "cdn.redoc.ly/redoc/logo-mini.svg"

pytestmark = [
    pytest.mark.slow,  # a server process, two browsers and a report: about a minute
    pytest.mark.skipif(
        not CHROMIUM.exists() or not CHROMEDRIVER.exists(),
        reason="Debian " + " and ".join(
            name for name, path in (("chromium", CHROMIUM), ("chromium-driver", CHROMEDRIVER))
            if not path.exists()) + " not installed (apt-get install -y chromium "
                                    "chromium-driver)",
    ),
]

# What the roofline chart shows: markers actually drawn as SVG paths for its point traces,
# the tick labels of both axes, its title and annotations, and whether the title overlaps
# the chart's toolbar.
CHART = """
const chart = document.querySelector('#rooflines .roofline');
let drawn = 0;
for (const trace of chart._fullData) {
  if (trace.meta !== 'roof') {
    drawn += chart.querySelectorAll('g.trace' + trace.uid + ' path.point').length;
  }
}
const texts = sel => [...chart.querySelectorAll(sel)].map(t => t.textContent);
const title = chart.querySelector('.gtitle').getBoundingClientRect();
const bar = chart.querySelector('.modebar').getBoundingClientRect();
const overlap = !(title.right <= bar.left || bar.right <= title.left ||
                  title.bottom <= bar.top || bar.bottom <= title.top);
return {device: chart.dataset.device, drawn: drawn, points: +chart.dataset.points,
        measurements: +chart.dataset.measurements, yticks: texts('.ytick text'),
        xticks: texts('.xtick text'), caption: chart.nextElementSibling.textContent,
        notes: texts('.annotation-text'), overlap: overlap,
        charts: document.querySelectorAll('#rooflines .js-plotly-plot').length,
        pressed: [...document.querySelectorAll('#devices button[aria-pressed=true]')]
                 .map(b => b.textContent)};
"""
DEVICE_BUTTONS = "return [...document.querySelectorAll('#devices button')].map(b => b.textContent)"
# Right edge of each header cell, and how wide the page scrolls.
HEADERS = """
return {width: window.innerWidth, scroll: document.documentElement.scrollWidth,
        headers: [...document.querySelectorAll('#best th')].map(
          th => [th.textContent, th.getBoundingClientRect().right])};
"""


def _driver(profile: Path, *extra: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, *extra):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)),
                            options=options)


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
    driver = _driver(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def offline_browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    driver = _driver(tmp_path_factory.mktemp("chromium-offline"), *OFFLINE_FLAGS)
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


def _open(driver, url: str) -> None:
    driver.get(url)
    _wait(driver, lambda d: d.execute_script("return window.xe2tReady === true"),
          what="the dashboard's first complete render")


def _roofline_of(driver, device: str) -> dict:
    """Choose ``device`` with its button and return what its drawn chart shows."""
    driver.execute_script(
        "[...document.querySelectorAll('#devices button')]"
        ".find(b => b.textContent === arguments[0]).click()", device)
    _wait(driver, lambda d: d.execute_script(
        "return document.querySelector('#rooflines .roofline').dataset.device") == device,
        what=f"the roofline of {device}")
    return driver.execute_script(CHART)


def _every_roofline(driver) -> dict[str, dict]:
    """Each device's chart, chosen in turn with the device buttons."""
    return {name: _roofline_of(driver, name)
            for name in driver.execute_script(DEVICE_BUTTONS)}


def _save(driver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / name))


def test_rooflines_read_in_engineering_units_and_keep_every_best(server: str, browser,
                                                                  filled: FilledDb):
    _open(browser, f"{server}/?max_points={BUDGET}")
    first = browser.execute_script(CHART)
    _save(browser, "dashboard.png")
    charts = _every_roofline(browser)
    assert set(charts) == set(filled.ok_per_device)
    assert first["device"] == browser.execute_script(DEVICE_BUTTONS)[0]
    for name, chart in charts.items():
        assert chart["charts"] == 1 and chart["pressed"] == [name]  # one device at a time
        assert chart["measurements"] == filled.ok_per_device[name]
        assert chart["drawn"] == chart["points"]  # every drawn point is a visible marker
        assert chart["yticks"]
        assert all(t.endswith(("GFLOP/s", "TFLOP/s")) for t in chart["yticks"])
        assert all(t.replace(".", "").isdigit() for t in chart["xticks"])
        assert any(n.startswith("bandwidth ") and n.endswith("GB/s") for n in chart["notes"])
        assert any(n.endswith("TFLOP/s") for n in chart["notes"])
        assert any(n.startswith("ridge ") for n in chart["notes"])
        assert not chart["overlap"], f"{name}: the title runs under the chart's toolbar"
    downsampled = _roofline_of(browser, DEVICE_A.name)
    assert downsampled["points"] < downsampled["measurements"]
    # the hovers the page joined again from the shared problem and config lines
    hovers = browser.execute_script(
        "const chart = document.querySelector('#rooflines .roofline');"
        "return chart.data.filter(t => t.meta === 'best').flatMap(t => Array.from(t.text))")
    assert hovers and all(h.count("<br>") == 3 for h in hovers)
    assert all(h.startswith(("prefill d", "decode d")) and " QK " in h.split("<br>")[1]
               and "trial " in h.split("<br>")[3] for h in hovers)
    assert downsampled["caption"].startswith(
        f"{downsampled['points']} points stand for {downsampled['measurements']} measurements")
    assert _severe(browser) == []


def test_the_chosen_device_stays_in_the_url(server: str, browser, filled: FilledDb):
    _open(browser, f"{server}/")
    last = browser.execute_script(DEVICE_BUTTONS)[-1]
    assert _roofline_of(browser, last)["device"] == last
    url = browser.current_url
    assert "device=" in url
    _open(browser, url)  # a reload, or the link sent to a colleague
    assert browser.execute_script(CHART)["device"] == last
    assert _severe(browser) == []


# The headers show a new sort at once; its rows come from the server: the page has drawn them
# when the table is no longer aria-busy.
TABLE_DRAWN = "return document.getElementById('best').getAttribute('aria-busy') === 'false'"


def test_best_table_fits_1366px_and_pages_on_the_server(server: str, browser,
                                                        filled: FilledDb):
    _open(browser, f"{server}/")
    seen = browser.execute_script(HEADERS)
    titles = [title for title, _ in seen["headers"]]
    assert titles[:5] == ["time (ms)", "TFLOP/s", "roofline %", "\u00d7 default",
                          "\u00d7 baseline"]
    assert "config (seed vocabulary)" in titles
    assert all(right <= seen["width"] for _, right in seen["headers"]), seen
    assert seen["scroll"] <= seen["width"]
    rows = ("return [...document.querySelectorAll('#best tbody tr.row')]"
            ".map(r => r.children[0].textContent)")
    assert len(browser.execute_script(rows)) == len(filled.study_ids)
    browser.execute_script("document.querySelector('#best th[data-key=time_ms]').click()")
    _wait(browser, lambda d: d.execute_script(TABLE_DRAWN), what="the sorted page")
    assert browser.execute_script("return document.querySelector('#best th.sorted-asc')"
                                  ".dataset.key") == "time_ms"
    times = [float(t) for t in browser.execute_script(rows)]
    assert times == sorted(times) and len(times) == len(filled.study_ids)
    browser.execute_script(
        "const s = document.querySelector('#filters select[name=dtype]');"
        "s.value = 'bf16'; s.dispatchEvent(new Event('change'));")
    _wait(browser, lambda d: d.execute_script(TABLE_DRAWN), what="the bf16 page")
    assert len(browser.execute_script(rows)) == 2
    browser.execute_script("document.querySelector('#best tbody tr.row').click()")
    detail = _wait(browser, lambda d: d.execute_script(
        "const r = document.querySelector('#best tr.detail'); return r && r.textContent"),
        what="the expanded row")
    assert "seed 000 SageV1" in detail and "oneDNN default" in detail and "QK " in detail
    assert _severe(browser) == []


def test_study_views_draw_convergence_and_importance(server: str, browser, filled: FilledDb):
    _open(browser, f"{server}/")
    options = browser.execute_script("return document.querySelectorAll('#study option').length")
    assert options == len(filled.study_ids)
    _wait(browser, lambda d: d.execute_script(
        "return document.querySelectorAll('#importance g.textpoint').length > 0"),
        what="the parameter importance bars and their values")
    assert browser.execute_script(
        "return document.querySelectorAll('#convergence g.trace.scatter').length") >= 2
    browser.execute_script("document.getElementById('studies').scrollIntoView()")
    _save(browser, "dashboard-studies.png")
    assert _severe(browser) == []


def test_dashboard_refreshes_itself_while_results_arrive(server: str, browser,
                                                         filled: FilledDb):
    _open(browser, f"{server}/")
    count = ("return document.querySelector("
             f"'.roofline[data-device=\"{DEVICE_A.name}\"]').dataset.measurements")
    before = int(browser.execute_script(count))
    store = open_store(filled.url)
    try:
        device_id = next(d.id for d in store.devices() if d.name == DEVICE_A.name)
        study = next(s for s in store.studies() if s.device_id == device_id)
        config = launcher_config(study.problem.head_dim, 32, 32, 1, 2)
        store.record_trial(study.id, ok_result(study.problem, config, 0.2), number=99)
    finally:
        store.close()
    _wait(browser, lambda d: int(d.execute_script(count)) == before + 1, timeout=60,
          what="the new measurement to appear without a reload")
    assert f"{filled.n_trials + 1} measurements" in browser.execute_script(
        "return document.getElementById('status').textContent")
    assert _severe(browser) == []


def test_docs_and_redoc_render_without_network(server: str, offline_browser):
    offline_browser.get(f"{server}/docs")
    operations = _wait(offline_browser, lambda d: d.execute_script(
        "return [...document.querySelectorAll('.opblock-summary-path')]"
        ".map(e => e.textContent)"), what="Swagger UI's operations")
    assert any("/v1/best" in path for path in operations)
    _save(offline_browser, "docs.png")
    assert _severe(offline_browser) == []
    offline_browser.get(f"{server}/redoc")
    _wait(offline_browser, lambda d: d.execute_script(
        "return document.body.innerText.includes('/v1/best')"), what="ReDoc's operations")
    _save(offline_browser, "redoc.png")
    assert [e for e in _severe(offline_browser) if REDOC_ATTRIBUTION not in e["message"]] == []


def test_report_is_one_offline_file_with_the_same_views(offline_browser, filled: FilledDb,
                                                        tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    subprocess.run([xe2tune_command(), "report", "--out", str(out), "--db", filled.url],
                   check=True, timeout=600, capture_output=True)
    assert "<script src=" not in out.read_text(encoding="utf-8")
    _open(offline_browser, out.as_uri())
    charts = list(_every_roofline(offline_browser).values())
    store = open_store(filled.url)
    try:
        expected = {d.name for d in store.devices()}
        tuned = len(store.best_per_problem())
    finally:
        store.close()
    assert {c["device"] for c in charts} == expected
    assert all(c["drawn"] == c["points"] == c["measurements"] for c in charts)
    assert all(t.endswith("FLOP/s") for c in charts for t in c["yticks"])
    assert len(offline_browser.execute_script(
        "return document.querySelectorAll('#best tbody tr.row')")) == tuned
    _wait(offline_browser, lambda d: d.execute_script(
        "return document.querySelectorAll('#importance g.textpoint').length > 0"),
        what="the importance bars of the report and their values")
    _save(offline_browser, "report.png")
    assert _severe(offline_browser) == []
