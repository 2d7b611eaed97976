"""The service over a database that a real small search on the CPU device filled."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from _api_fixtures import api_settings
from fastapi.testclient import TestClient

from tests._stated_ceilings import store_stated_ceilings
from xe2tune.api import create_asgi_app

SEARCH = ["xe2tune", "search", "--head-dim", "64", "--mode", "prefill", "--no-causal",
          "--seq", "96", "--dtype", "fp16", "--heads-q", "4", "--heads-kv", "2",
          "--trials", "3", "--seed", "3", "--json"]


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory, cpu_queue) -> tuple[str, dict]:
    url = f"sqlite:///{tmp_path_factory.mktemp('search') / 'real.db'}"
    # Stated ceilings: the search skips the minute of measuring them (nothing here reads a
    # roofline fraction; tests/tuner/test_search.py has a search measure them).
    store_stated_ceilings(url, cpu_queue)
    proc = subprocess.run([*SEARCH, "--db", url], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return url, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def client(searched: tuple[str, dict]) -> Iterator[TestClient]:
    with TestClient(create_asgi_app(api_settings(db_url=searched[0]))) as test_client:
        yield test_client


@pytest.mark.slow
def test_best_serves_what_the_search_found(client: TestClient, searched: tuple[str, dict]):
    (row,) = searched[1]["problems"]
    exact = client.get("/v1/best", params={"head_dim": 64, "dtype": "fp16", "seq": 96,
                                            "heads_q": 4, "heads_kv": 2})
    assert exact.status_code == 200, exact.text
    body = exact.json()
    assert body["match"] == "exact"
    assert body["config"]["shape_qk"] == row["best_config"]["shape_qk"]
    assert body["median_s"] == pytest.approx(row["best_median_s"])
    nearest = client.get("/v1/best", params={"head_dim": 64, "dtype": "fp16", "seq": 200})
    assert nearest.status_code == 200 and nearest.json()["match"] == "nearest"
    missing = client.get("/v1/best", params={"head_dim": 128, "dtype": "fp16", "seq": 96})
    assert missing.status_code == 404


@pytest.mark.slow
def test_results_and_studies_list_every_measured_trial(client: TestClient,
                                                       searched: tuple[str, dict]):
    (row,) = searched[1]["problems"]
    results = client.get("/v1/results", params={"limit": 50}).json()
    items = results["items"] if isinstance(results, dict) else results
    assert len(items) == row["measured"]
    studies = client.get("/v1/studies").json()
    studies = studies["items"] if isinstance(studies, dict) else studies
    assert len(studies) == 1
    trials = client.get(f"/v1/studies/{studies[0]['id']}/trials").json()
    trials = trials["items"] if isinstance(trials, dict) else trials
    assert len(trials) == row["measured"]
