"""The service at lab scale: 1,000,000 measurements over 2,000 problems and 3 devices.

Targets (issue 16; 2 cores, loopback): the dashboard's first payload <= 2 MB, its first complete
render in headless Chromium <= 3 s (the page's own ``performance`` marks), opening a study
<= 1 s; varied ``GET /v1/best`` at 2,000 req/s offered with p99 < 20 ms and no errors, the
closed-loop capacity beside it; ``xe2tune results --format csv`` streams in bounded memory.

What it does:
  1. Fills a SQLite database through ``ResultStore.record_trials`` (``api_load.fill``; every
     problem studied on every device, one transaction per study with its default and two
     seeded baselines) and keeps it for later runs (checked by counting rows); 10^6 took 32
     minutes in 2 processes on 2 cores that the test suite shared. Run it once in the
     background: ``nohup python benchmarks/dashboard_scale.py --fill-only &``.
  2. Starts ``xe2tune serve`` on it, waits until the server has computed the page's views
     ahead (it does so after every data change), and measures the first payload, then in
     headless Chromium (Debian ``chromium`` + ``chromium-driver``), ``--rounds`` times, a fresh
     browser's first and second visit, switching the roofline to each other device and
     opening a study. ``--peer XE2TUNE`` serves the database (or ``--peer-db``: a tree
     older than the database's schema refuses it, so give it a copy at its own) from another
     tree's ``xe2tune`` (say the previous commit's, installed in its own virtualenv) and
     measures both pages in the same rounds, alternating which goes first.
  3. Runs ``api_load``'s varied-query load: paced at 2,000 req/s from a cold start, again
     steady, wrk closed-loop, then the steady run again while another process writes a trial
     every ``--writes-every`` seconds into a copy of the database (a campaign's writes).
  4. Runs ``xe2tune results --format csv`` into /dev/null and reports its peak RSS.

Usage:
    python benchmarks/dashboard_scale.py [--measurements 1000000] [--problems 2000]
        [--db-dir DIR] [--fill-only] [--db URL (measure this database, no fill)]
        [--rounds 3] [--peer PATH-OF-ANOTHER-TREE'S-xe2tune [--peer-db URL]]
        [--skip dashboard load csv]
        [api_load's load options: --rate --connections --duration --workers --distinct
         --writes-every]

The previous commit as the peer:
    git worktree add /tmp/peer HEAD~1 && python -m venv /tmp/peer-venv && \
      /tmp/peer-venv/bin/pip install -e /tmp/peer
    cp /work/runs/dashboard_scale_1000000_2000.db /work/runs/peer.db  # before a migration
    python benchmarks/dashboard_scale.py --skip load csv --peer /tmp/peer-venv/bin/xe2tune \
      --peer-db sqlite:////work/runs/peer.db
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from api_load import (
    add_load_arguments,
    fill,
    load,
    load_while_writing,
    reusable,
    varied_queries,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _api_fixtures import DEVICE_A, FillPlan, running_server, xe2tune_command  # noqa: E402

from xe2tune.db import open_store  # noqa: E402
from xe2tune.kernels import HEAD_DIMS, ProblemSpec  # noqa: E402

DEVICES = tuple(DEVICE_A.model_copy(update={"name": f"Synthetic Xe2 {letter}"})
                for letter in "ABC")
TARGET_PAYLOAD_MB = 2.0
TARGET_RENDER_S = 3.0
TARGET_STUDY_S = 1.0
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--window-size=1366,900")
# Open another study from the page's own select, as a person does; resolve when both of its
# charts are drawn and on screen (the next frame). The milliseconds it took, measured in the
# page.
OPEN_STUDY = """
const done = arguments[arguments.length - 1];
const select = document.getElementById("study");
const option = select.options[select.options.length - 1];
const started = performance.now();
select.value = option.value;
select.dispatchEvent(new Event("change"));
const wanted = "study " + option.value + ":";
(function check() {
  const title = document.querySelector("#convergence .gtitle");
  const ranked = document.querySelector("#importance .note, #importance .gtitle");
  if (title && title.textContent.startsWith(wanted) && ranked) {
    requestAnimationFrame(() => setTimeout(() => done(performance.now() - started), 0));
  } else {
    setTimeout(check, 10);
  }
})();
"""
# Show each other device's roofline with its button, as a person does; resolve when its chart is
# drawn (the chart names its device once drawn) and on screen (the next frame). The
# milliseconds of each, measured in the page; null on a page without device buttons (one that
# draws every device at once).
SWITCH_DEVICES = """
const done = arguments[arguments.length - 1];
const buttons = [...document.querySelectorAll("#devices button")];
if (!buttons.length) { done(null); return; }
const chart = document.querySelector("#rooflines .roofline");
const times = [];
(function next(i) {
  if (i === buttons.length) { done(times); return; }
  if (buttons[i].getAttribute("aria-pressed") === "true") { next(i + 1); return; }
  const started = performance.now();
  buttons[i].click();
  (function check() {
    if (chart.dataset.device === buttons[i].textContent) {
      requestAnimationFrame(() => setTimeout(() => {
        times.push(performance.now() - started);
        next(i + 1);
      }, 0));
    } else {
      setTimeout(check, 10);
    }
  })();
})(0);
"""


def problems(count: int) -> tuple[ProblemSpec, ...]:
    """``count`` distinct problems: every head dim and dtype, prefill / causal / decode GQA,
    sequence lengths in steps of 256 (a lab tunes many lengths of a few model shapes)."""
    kinds = [(d, t, k) for d in HEAD_DIMS for t in ("fp16", "bf16")
             for k in ("prefill", "causal", "decode")]
    out: list[ProblemSpec] = []
    step = 0
    while len(out) < count:
        seq = 256 * (step // len(kinds) + 1)
        head_dim, dtype, kind = kinds[step % len(kinds)]
        if kind == "decode":
            out.append(ProblemSpec("decode", head_dim, dtype, 1, seq * 4, heads_q=32,
                                   heads_kv=8))
        else:
            out.append(ProblemSpec("prefill", head_dim, dtype, seq, seq,
                                   causal=kind == "causal"))
        step += 1
    return tuple(out)


def timed_get(url: str) -> tuple[int, float]:
    """Bytes and seconds of one GET that must answer 200."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        assert response.status == 200, url
        body = response.read()
    return len(body), time.perf_counter() - started


def browser():
    """Headless Debian chromium through selenium (never downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"),
                              options=options)
    driver.set_script_timeout(120)
    return driver


def render(driver, base: str) -> dict[str, float]:
    """Load the page and wait for its first complete render; the page's own marks (ms)."""
    driver.get(f"{base}/")
    deadline = time.monotonic() + 300
    while not driver.execute_script("return window.xe2tReady === true"):
        if time.monotonic() > deadline:
            raise SystemExit("the dashboard did not finish drawing in 300 s")
        time.sleep(0.05)
    return driver.execute_script("return window.xe2tTimings")


def wait_for_views(base: str, started: float) -> None:
    """Wait until the server has computed the page's views ahead (as it does after every data
    change; a server that has been up a while has them), printing how long that took."""
    while not json.loads(urllib.request.urlopen(f"{base}/dashboard/version",
                                                timeout=600).read())["views_ready"]:
        if time.monotonic() - started > 600:
            raise SystemExit("the server did not compute its dashboard views in 600 s")
        time.sleep(0.1)
    print(f"views computed ahead by the server (summary, every device's roofline): "
          f"{time.monotonic() - started:.1f} s after it started")


def _marks(marks: dict[str, float]) -> str:
    return ", ".join(f"{k} {v / 1e3:.2f} s" for k, v in sorted(marks.items(),
                                                             key=lambda kv: kv[1]))


def _one_browser(base: str) -> dict[str, object]:
    """A fresh browser's first and second visit, each other device's roofline, a study."""
    driver = browser()
    try:
        first = render(driver, base)
        second = render(driver, base)
        sizes = driver.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter(e => e.name.includes('/dashboard/'))"
            ".map(e => [e.name.split('/dashboard/')[1], e.encodedBodySize])")
        switches = driver.execute_async_script(SWITCH_DEVICES)
        study_ms = driver.execute_async_script(OPEN_STUDY)
    finally:
        driver.quit()
    return {"first": first, "second": second, "sizes": sizes, "switches": switches,
            "study_ms": study_ms}


def measure_dashboard(bases: dict[str, str], started: float, rounds: int) -> None:
    """First payload, then per round and page: first complete render (a fresh browser's first
    visit, then its second), switching devices, opening a study; the pages alternate."""
    for base in bases.values():
        wait_for_views(base, started)
    base = next(iter(bases.values()))
    html_bytes, html_s = timed_get(f"{base}/")
    summary_bytes, summary_s = timed_get(f"{base}/dashboard/summary")
    print(f"first payload: the page {html_bytes / 1e6:.2f} MB (summary embedded) in "
          f"{html_s:.2f} s; /dashboard/summary alone {summary_bytes / 1e6:.2f} MB in "
          f"{summary_s:.2f} s; plotly.js is a separate immutable asset the browser caches")
    runs: dict[str, list[dict[str, object]]] = {label: [] for label in bases}
    for number in range(rounds):
        order = list(bases.items()) if number % 2 == 0 else list(reversed(bases.items()))
        for label, page_base in order:
            run = _one_browser(page_base)
            runs[label].append(run)
            switches = run["switches"]
            print(f"round {number + 1}, {label}: first complete render: first visit "
                  f"{run['first']['xe2t-ready'] / 1e3:.2f} s ({_marks(run['first'])}); "
                  f"second visit {run['second']['xe2t-ready'] / 1e3:.2f} s; "
                  + ("every device drawn at once" if switches is None else
                     "another device's roofline " + ", ".join(
                         f"{ms / 1e3:.2f}" for ms in switches) + " s")
                  + f"; opening a study {run['study_ms'] / 1e3:.2f} s", flush=True)
    print("on-demand responses of the first page (bytes): "
          + json.dumps(next(iter(runs.values()))[0]["sizes"]))
    for label, page_runs in runs.items():
        def median_s(values: list[float]) -> str:
            return f"{statistics.median(values) / 1e3:.2f} s"
        firsts = [r["first"]["xe2t-ready"] for r in page_runs]
        print(f"{label} over {rounds} rounds: first complete render, first visit median "
              f"{median_s(firsts)} (max {max(firsts) / 1e3:.2f} s), second visit median "
              f"{median_s([r['second']['xe2t-ready'] for r in page_runs])}; opening a study "
              f"median {median_s([r['study_ms'] for r in page_runs])}"
              + ("" if page_runs[0]["switches"] is None else
                 "; another device's roofline median "
                 + median_s([ms for r in page_runs for ms in r["switches"]])))
    mine = runs["this tree"]
    verdicts = {
        f"first payload <= {TARGET_PAYLOAD_MB} MB": html_bytes / 1e6 <= TARGET_PAYLOAD_MB,
        f"first complete render <= {TARGET_RENDER_S:.0f} s on every first visit": all(
            r["first"]["xe2t-ready"] <= TARGET_RENDER_S * 1e3 for r in mine),
        f"opening a study <= {TARGET_STUDY_S:.0f} s every time": all(
            r["study_ms"] <= TARGET_STUDY_S * 1e3 for r in mine),
    }
    print("targets (this tree): " + "; ".join(
        f"{what}: {'MET' if met else 'MISSED'}" for what, met in verdicts.items()))


def _high_water_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # it has exited
        return None
    found = next((line for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return None if found is None else int(found.split()[1]) / 1024


def measure_csv(url: str) -> None:
    """``xe2tune results --format csv`` into /dev/null: seconds and its peak RSS (VmHWM, read
    from /proc while it runs; the last reading before it exits)."""
    started = time.monotonic()
    peak = 0.0
    with open(os.devnull, "w") as sink:
        process = subprocess.Popen([xe2tune_command(), "results", "--format", "csv", "--db",
                                    url], stdout=sink)
        while process.poll() is None:
            peak = max(peak, _high_water_mb(process.pid) or 0.0)
            time.sleep(0.05)
    if process.returncode != 0:
        raise SystemExit(f"xe2tune results --format csv failed ({process.returncode})")
    print(f"xe2tune results --format csv: {time.monotonic() - started:.1f} s, peak RSS "
          f"{peak:.0f} MB")


def main() -> None:
    """Fill (or reuse), serve, measure the dashboard, load /v1/best, export CSV."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measurements", type=int, default=1_000_000)
    parser.add_argument("--problems", type=int, default=2000)
    parser.add_argument("--db-dir", type=Path, default=Path("/work/runs"))
    parser.add_argument("--db", help="measure this database as it is (no fill)")
    parser.add_argument("--fill-workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--fill-only", action="store_true")
    parser.add_argument("--skip", nargs="*", default=[], choices=("dashboard", "load", "csv"),
                        help="parts not to measure")
    parser.add_argument("--rounds", type=int, default=3,
                        help="fresh browsers per page (each: a first and a second visit)")
    parser.add_argument("--peer", help="another tree's xe2tune console script: its page is "
                                       "measured in the same rounds")
    parser.add_argument("--peer-db", help="the database the peer serves (default: the same)")
    add_load_arguments(parser)
    args = parser.parse_args()
    url = args.db
    if url is None:
        path = args.db_dir / f"dashboard_scale_{args.measurements}_{args.problems}.db"
        url = f"sqlite:///{path}"
        if not reusable(path, args.measurements):
            fill(url, FillPlan(problems(args.problems), DEVICES, args.measurements,
                               baselines=2), args.fill_workers)
        if args.fill_only:
            return
    store = open_store(url, read_only=True)
    try:
        print(f"database {url}: {store.count_results():,} measurements, "
              f"{len(store.studies()):,} studies, {len(store.devices())} devices")
    finally:
        store.close()
    print("CPU: " + next((line.split(":", 1)[1].strip() for line in
                          Path("/proc/cpuinfo").read_text().splitlines()
                          if line.startswith("model name")), "unknown")
          + f", {os.cpu_count()} cores; load average " + ", ".join(
              f"{v:.2f}" for v in os.getloadavg()))
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        base = servers.enter_context(running_server(url, Path(tmp) / "serve.log",
                                                    workers=args.workers))
        bases = {"this tree": base}
        if args.peer and "dashboard" not in args.skip:
            bases["peer"] = servers.enter_context(running_server(
                args.peer_db or url, Path(tmp) / "peer.log", workers=args.workers,
                executable=args.peer))
        if "dashboard" not in args.skip:
            measure_dashboard(bases, started, args.rounds)
            if args.peer:
                servers.close()  # the load below is this tree's alone
                base = servers.enter_context(running_server(url, Path(tmp) / "serve2.log",
                                                            workers=args.workers))
        if "load" not in args.skip:
            queries = varied_queries(url, args.distinct)
            load(base, queries, args)
    if "load" not in args.skip and args.writes_every > 0:
        load_while_writing(url, queries, args)
        if args.peer:
            load_while_writing(args.peer_db or url, queries, args, executable=args.peer,
                               label="peer")
    if "csv" not in args.skip:
        measure_csv(url)


if __name__ == "__main__":
    main()
