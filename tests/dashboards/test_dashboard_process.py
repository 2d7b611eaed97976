"""The dashboard's views in a child process: the same answers as in this process, errors that
cross over as themselves, and a child that ends with its server, ``kill -9`` included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from _api_fixtures import FilledDb, fill_database, free_port, xe2tune_command

from xe2tune.dashboards import BestPageQuery, DashboardCache
from xe2tune.dashboards._process import DashboardProcess
from xe2tune.db import open_store
from xe2tune.errors import StoreError


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> FilledDb:
    return fill_database(str(tmp_path_factory.mktemp("process") / "dashboard.db"))


def test_the_child_answers_what_the_cache_answers_here(filled: FilledDb):
    store = open_store(filled.url)
    here = DashboardCache(store)
    there = DashboardProcess(filled.url, ahead_every_s=0.2)
    try:
        device_ids = [d.id for d in store.devices()]
        assert there.version() == here.version() == store.data_version()
        assert there.summary_json() == here.summary_json()
        for device_id in device_ids:
            assert there.roofline(device_id, 12) == here.roofline(device_id, 12)
        assert there.roofline(max(device_ids) + 1, 12) is None
        query = BestPageQuery(dtype="fp16", sort="time_ms", descending=True, offset=1, limit=3)
        assert json.loads(there.best_page(query)) == json.loads(here.best_page(query))
        study_id = filled.study_ids[0]
        assert there.study(study_id) == here.study(study_id)
        assert json.loads(there.importance(study_id)) == json.loads(here.importance(study_id))
        assert there.study(10**9) is None and there.importance(10**9) is None
        page = there.page(plotly_src="/static/plotly.js", poll_s=5.0)
        assert page.startswith("<!DOCTYPE html>") and "/static/plotly.js" in page
        deadline = time.monotonic() + 60
        while not there.views_ready():  # its ahead thread computes the first views
            assert time.monotonic() < deadline, "the child never computed its views ahead"
            time.sleep(0.1)
    finally:
        there.close()
        store.close()


def test_a_store_error_in_the_child_is_raised_here(tmp_path: Path):
    with pytest.raises(StoreError, match="does not exist|no such|not found|missing"):
        DashboardProcess(f"sqlite:///{tmp_path / 'missing.db'}", ahead_every_s=1.0)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_the_child_ends_with_its_server_even_when_killed(filled: FilledDb):
    port = free_port()
    server = subprocess.Popen([xe2tune_command(), "serve", "--port", str(port), "--db",
                               filled.url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/dashboard/summary", timeout=5) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "no answer"
                time.sleep(0.2)
        children = _children(server.pid)
        assert children, "the views were not computed in a child process"
        os.kill(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(_alive(child) for child in children):
            assert time.monotonic() < deadline, "the dashboard child outlived its server"
            time.sleep(0.2)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
