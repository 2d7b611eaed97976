"""Every endpoint of the service through FastAPI's TestClient, on a real SQLite database."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _api_fixtures import (
    BASELINE_FAMILY,
    BASELINES,
    CONFIG_GRID,
    DEVICE_A,
    DEVICE_B,
    FAMILY,
    PROBLEMS_A,
    FilledDb,
    api_settings,
    best_fraction,
    fill_database,
    launcher_config,
    ok_result,
    shared_database,
    submission_payload,
)
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from xe2tune.api import create_app, create_asgi_app
from xe2tune.api._index import BestIndex
from xe2tune.cli import app
from xe2tune.db import BestQuery, export_json, load_json, open_store
from xe2tune.errors import StoreError
from xe2tune.kernels import ProblemSpec

TOKEN = "test-token-1234"


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> FilledDb:
    return shared_database(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def client(filled: FilledDb) -> Iterator[TestClient]:
    with TestClient(create_asgi_app(api_settings(db_url=filled.url))) as test_client:
        yield test_client


def _best(client: TestClient, **params: object):
    return client.get("/v1/best", params=params)


# -- health, docs ---------------------------------------------------------------------------


def test_healthz_reports_the_database_and_its_version(client: TestClient, filled: FilledDb):
    body = client.get("/healthz").json()
    assert body["status"] == "ok"
    assert body["database"] == filled.url
    assert body["data_version"] > 0


def test_openapi_documents_every_resource(client: TestClient):
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/best", "/v1/configs", "/v1/export", "/v1/results", "/v1/devices",
                 "/v1/studies", "/v1/studies/{study_id}/trials", "/healthz"):
        assert path in paths
    assert "post" in paths["/v1/results"]
    assert client.get("/docs").status_code == 200


# -- /v1/best -------------------------------------------------------------------------------


def test_best_exact_returns_the_fastest_config_in_launcher_vocabulary(client: TestClient):
    response = _best(client, head_dim=128, dtype="fp16", seq=1024, device=DEVICE_A.name)
    assert response.status_code == 200
    body = response.json()
    assert body["match"] == "exact"
    assert body["problem"] == ProblemSpec("prefill", 128, "fp16", 1024, 1024).to_dict()
    bq, bk, stages, sg_q, _ = max(CONFIG_GRID, key=lambda c: c[-1])
    assert body["config"] == launcher_config(128, bq, bk, stages, sg_q).to_dict()
    assert set(body["config"]) == {"family", "shape_qk", "shape_pv", "shape_out",
                                   "subgroup_layout", "stages", "vtiles", "subgroup_size",
                                   "knobs"}
    assert body["family"] == body["config"]["family"] == FAMILY and body["baseline"] is None
    assert body["roofline_fraction"] == pytest.approx(best_fraction(), rel=1e-9)
    assert body["speedup"] == pytest.approx(best_fraction() / CONFIG_GRID[0][-1], rel=1e-9)
    assert body["device"] == DEVICE_A.name
    assert body["median_s"] > 0 and body["tflops"] > 0


def test_best_shows_the_seeded_baselines_beside_the_tuned_best(client: TestClient):
    body = _best(client, head_dim=128, dtype="fp16", seq=1024, device=DEVICE_A.name).json()
    labels = sorted(BASELINES.values())
    assert [b["label"] for b in body["baselines"]] == labels
    for baseline in body["baselines"]:
        index = next(i for i, label in BASELINES.items() if label == baseline["label"])
        bq, bk, stages, sg_q, fraction = CONFIG_GRID[index]
        config = launcher_config(128, bq, bk, stages, sg_q, family=BASELINE_FAMILY)
        assert baseline["family"] == BASELINE_FAMILY and baseline["status"] == "ok"
        assert baseline["config"] == config.to_dict()
        assert baseline["config_hash"] == config.config_hash()
        assert baseline["speedup"] == pytest.approx(best_fraction() / fraction, rel=1e-9)
        assert baseline["median_s"] == pytest.approx(body["median_s"] * baseline["speedup"])
    [listed] = [c for c in load_json(client.get("/v1/configs").text)
                if c.trial_id == body["trial_id"]]
    assert [b.label for b in listed.baselines] == labels


def test_best_without_device_uses_the_only_device_with_that_key(client: TestClient):
    body = _best(client, head_dim=128, dtype="fp16", seq=1024).json()
    assert body["match"] == "exact" and body["device"] == DEVICE_A.name


def test_best_device_by_id(client: TestClient):
    device_id = next(d["id"] for d in client.get("/v1/devices").json()
                     if d["name"] == DEVICE_B.name)
    body = _best(client, head_dim=64, dtype="bf16", seq=2048, device=str(device_id)).json()
    assert body["match"] == "exact" and body["device"] == DEVICE_B.name


@pytest.mark.parametrize(("seq", "tuned_kv"), [(2048, 1024), (3000, 4096), (100, 512)])
def test_best_nearest_takes_the_closest_seq_on_a_log_scale(client: TestClient, seq: int,
                                                           tuned_kv: int):
    body = _best(client, head_dim=128, dtype="fp16", seq=seq).json()
    assert body["match"] == "nearest"
    assert body["problem"]["kv_len"] == tuned_kv
    assert body["query"]["seq"] == seq


def test_best_keeps_causal_and_mode_apart(client: TestClient):
    causal = _best(client, head_dim=128, dtype="fp16", seq=1024, causal="true").json()
    assert causal["match"] == "exact" and causal["problem"]["causal"] is True
    decode = _best(client, head_dim=128, dtype="fp16", seq=8192, mode="decode").json()
    assert decode["match"] == "exact"
    assert decode["problem"]["mode"] == "decode" and decode["problem"]["heads_q"] == 32


def test_best_repeats_identical_bytes_from_the_fast_path(client: TestClient):
    index = client.app.app.app.state.best_index
    raw = b"head_dim=128&dtype=fp16&seq=4096"
    first = client.get(f"/v1/best?{raw.decode()}")
    assert index.cached_raw(raw) is not None  # the next request never reaches the router
    second = client.get(f"/v1/best?{raw.decode()}")
    assert first.content == second.content and second.status_code == 200
    assert second.headers["content-type"] == first.headers["content-type"]
    assert second.headers["content-length"] == first.headers["content-length"]


def test_best_never_remembers_a_bad_query_string(client: TestClient):
    raw = b"head_dim=128&dtype=fp16&seq=0"
    assert client.get(f"/v1/best?{raw.decode()}").status_code == 422
    assert client.app.app.app.state.best_index.cached_raw(raw) is None


def test_best_404_hints_what_is_tuned_and_how_to_tune(client: TestClient):
    response = _best(client, head_dim=96, dtype="fp16", seq=1024)
    assert response.status_code == 404
    detail = response.json()["detail"]
    assert "nothing tuned for head_dim=96 dtype=fp16" in detail
    assert "head_dim=128 dtype=fp16 mode=prefill" in detail
    assert "xe2tune search --head-dim 96 --dtype fp16" in detail


def test_best_404_for_an_unknown_device_lists_the_known_ones(client: TestClient):
    response = _best(client, head_dim=128, dtype="fp16", seq=1024, device="Arc B580")
    assert response.status_code == 404
    assert DEVICE_A.name in response.json()["detail"]


@pytest.mark.parametrize(("name", "value", "accepted"), [
    ("head_dim", "100", "64, 96, 128, 192, 256 or 576"),
    ("head_dim", "abc", "64, 96, 128, 192, 256 or 576"),
    ("dtype", "fp8", "'fp16', 'bf16' or 'fp32'"),
    ("seq", "0", "greater than or equal to 1"),
    ("seq", "many", "valid integer"),
    ("mode", "train", "'prefill' or 'decode'"),
    ("causal", "maybe", "valid boolean"),
    ("q_len", "0", "greater than or equal to 1"),
    ("heads_q", "-4", "greater than or equal to 1"),
    ("heads_kv", "0", "greater than or equal to 1"),
    ("batch", "0", "greater than or equal to 1"),
    ("device", "x" * 201, "at most 200 characters"),
])
def test_best_422_names_the_bad_parameter_and_what_is_accepted(
        client: TestClient, name: str, value: str, accepted: str):
    params = {"head_dim": "128", "dtype": "fp16", "seq": "1024", name: value}
    response = client.get("/v1/best", params=params)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert f"query parameter {name}:" in detail and accepted in detail
    assert [e["loc"] for e in response.json()["errors"]] == [["query", name]]


@pytest.mark.parametrize("missing", ["head_dim", "dtype", "seq"])
def test_best_422_names_a_missing_parameter(client: TestClient, missing: str):
    params = {"head_dim": "128", "dtype": "fp16", "seq": "1024"}
    del params[missing]
    response = client.get("/v1/best", params=params)
    assert response.status_code == 422
    assert f"query parameter {missing}: Field required" in response.json()["detail"]


def test_best_422_for_an_unknown_parameter(client: TestClient):
    response = _best(client, head_dim=128, dtype="fp16", seq=1024, seqlen=4)
    assert response.status_code == 422
    assert "query parameter seqlen is not accepted" in response.json()["detail"]


def test_best_422_when_several_devices_could_answer(client: TestClient):
    response = _best(client, head_dim=64, dtype="bf16", seq=2048)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "query parameter device" in detail
    assert DEVICE_A.name in detail and DEVICE_B.name in detail


# -- /v1/configs, /v1/export ----------------------------------------------------------------


def test_configs_is_the_json_export(client: TestClient, filled: FilledDb):
    response = client.get("/v1/configs")
    assert response.status_code == 200
    configs = load_json(response.text)
    store = open_store(filled.url)
    try:
        assert configs == store.best_per_problem()
    finally:
        store.close()
    assert len(configs) == len(PROBLEMS_A) + 1


def test_configs_filtered_by_device(client: TestClient):
    configs = load_json(client.get("/v1/configs", params={"device": DEVICE_B.name}).text)
    assert [c.device for c in configs] == [DEVICE_B.name]


@pytest.mark.parametrize(("fmt", "marker", "suffix"), [
    ("json", '"format": "xe2tune-best-configs"', ".json"), ("cpp", "#pragma once", ".hpp")])
def test_export_files(client: TestClient, fmt: str, marker: str, suffix: str):
    response = client.get("/v1/export", params={"format": fmt})
    assert response.status_code == 200
    assert marker in response.text
    assert response.headers["content-disposition"].endswith(f'{suffix}"')


def test_export_json_matches_configs(client: TestClient):
    exported = load_json(client.get("/v1/export", params={"format": "json"}).text)
    assert exported == load_json(client.get("/v1/configs").text)


def test_export_422_for_an_unknown_format(client: TestClient):
    response = client.get("/v1/export", params={"format": "xml"})
    assert response.status_code == 422
    assert "query parameter format" in response.json()["detail"]


# -- /v1/results ------------------------------------------------------------------------------


def test_results_pages_newest_first(client: TestClient, filled: FilledDb):
    first = client.get("/v1/results", params={"limit": 5}).json()
    assert first["total"] == filled.n_trials and first["limit"] == 5
    assert first["next_offset"] == 5
    ids = [item["trial_id"] for item in first["items"]]
    assert ids == sorted(ids, reverse=True) and len(ids) == 5
    last = client.get("/v1/results", params={"limit": 5, "offset": filled.n_trials - 2}).json()
    assert len(last["items"]) == 2 and last["next_offset"] is None
    everything = client.get("/v1/results", params={"limit": 1000}).json()
    assert len(everything["items"]) == filled.n_trials


@pytest.mark.parametrize(("name", "value"), [
    ("limit", "0"), ("limit", "1001"), ("offset", "-1"), ("status", "great"),
    ("mode", "train"), ("dtype", "fp8"), ("seq_min", "0"), ("causal", "sometimes"),
    ("study_id", "0"), ("device", "no such device")])
def test_results_422_names_the_bad_parameter(client: TestClient, name: str, value: str):
    response = client.get("/v1/results", params={name: value})
    assert response.status_code == 422
    assert f"query parameter {name}" in response.json()["detail"]


def test_results_422_for_an_empty_seq_range(client: TestClient):
    response = client.get("/v1/results", params={"seq_min": 4096, "seq_max": 1024})
    assert response.status_code == 422
    assert "seq_min" in response.json()["detail"] and "seq_max" in response.json()["detail"]


def test_results_filters(client: TestClient, filled: FilledDb):
    def total(**params: object) -> int:
        return client.get("/v1/results", params=params).json()["total"]

    per_study = len(CONFIG_GRID) + 1
    assert total(status="compile_error") == len(filled.study_ids)
    assert total(status="ok") == filled.n_ok
    assert total(device=DEVICE_B.name) == per_study
    assert total(head_dim=64, dtype="bf16") == 2 * per_study
    assert total(mode="decode") == per_study
    assert total(causal="true") == per_study
    assert total(seq_min=2000, seq_max=5000) == 3 * per_study
    assert total(study_id=filled.study_ids[0]) == per_study


# -- /v1/devices, /v1/studies -----------------------------------------------------------------


def test_devices_carry_their_peaks(client: TestClient):
    devices = client.get("/v1/devices").json()
    assert [d["name"] for d in devices] == [DEVICE_A.name, DEVICE_B.name]
    assert devices[0]["peak_flops"]["fp16"] == DEVICE_A.peak_flops["fp16"]
    assert devices[0]["peak_bandwidth"] == DEVICE_A.peak_bandwidth


def test_studies_and_their_trials(client: TestClient, filled: FilledDb):
    studies = client.get("/v1/studies").json()
    assert [s["id"] for s in studies] == filled.study_ids
    assert all(s["n_ok"] == len(CONFIG_GRID) for s in studies)
    only_b = client.get("/v1/studies", params={"device": DEVICE_B.name}).json()
    assert [s["device_name"] for s in only_b] == [DEVICE_B.name]
    study_id = filled.study_ids[0]
    assert client.get(f"/v1/studies/{study_id}").json()["id"] == study_id
    trials = client.get(f"/v1/studies/{study_id}/trials").json()
    assert len(trials) == len(CONFIG_GRID) + 1
    assert trials[0]["is_default"] is True
    assert len(trials[0]["measurement"]["samples"]) == 5
    assert trials[-1]["status"] == "compile_error" and trials[-1]["measurement"] is None


def test_studies_404_and_422(client: TestClient):
    assert client.get("/v1/studies/999999/trials").status_code == 404
    assert client.get("/v1/studies/999999").status_code == 404
    response = client.get("/v1/studies/0/trials")
    assert response.status_code == 422
    assert "path parameter study_id" in response.json()["detail"]


@pytest.mark.parametrize(("path", "detail"), [
    ("/dashboard/roofline/999999", "no device 999999"),
    ("/dashboard/study/999999", "no study 999999"),
    ("/dashboard/importance/999999", "no study 999999"),
])
def test_dashboard_views_404_name_what_does_not_exist(client: TestClient, path: str,
                                                      detail: str):
    response = client.get(path)
    assert response.status_code == 404
    assert detail in response.text


# -- POST /v1/results ---------------------------------------------------------------------------


@pytest.fixture
def empty_db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'remote.db'}"


def _payload(fraction: float = 0.5, bq: int = 128) -> dict:
    return submission_payload(PROBLEMS_A[1], launcher_config(128, bq, 64, 2, 8), fraction)


def test_post_is_disabled_without_a_configured_token(empty_db: str):
    with TestClient(create_app(api_settings(db_url=empty_db))) as client:
        response = client.post("/v1/results", json=_payload(),
                               headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 403
    assert "XE2TUNE_API_TOKEN" in response.json()["detail"]


def test_post_needs_the_right_bearer_token(empty_db: str):
    with TestClient(create_app(api_settings(db_url=empty_db, api_token=TOKEN))) as client:
        missing = client.post("/v1/results", json=_payload())
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = client.post("/v1/results", json=_payload(),
                            headers={"Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 403
        basic = client.post("/v1/results", json=_payload(),
                            headers={"Authorization": f"Basic {TOKEN}"})
        assert basic.status_code == 401
        assert client.get("/v1/results").json()["total"] == 0


def test_post_stores_once_and_is_idempotent(empty_db: str):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(api_settings(db_url=empty_db, api_token=TOKEN,
                                            index_poll_s=0.05))) as client:
        assert _best(client, head_dim=128, dtype="fp16", seq=1024).status_code == 404
        created = client.post("/v1/results", json=_payload(), headers=auth)
        assert created.status_code == 201 and created.json()["created"] is True
        again = client.post("/v1/results", json=_payload(), headers=auth)
        assert again.status_code == 200
        assert again.json() == {**created.json(), "created": False}
        assert client.get("/v1/results").json()["total"] == 1
        deadline = time.monotonic() + 10
        while (response := _best(client, head_dim=128, dtype="fp16", seq=1024)).status_code \
                == 404 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert response.status_code == 200
        assert response.json()["trial_id"] == created.json()["trial_id"]
        assert response.json()["match"] == "exact"


@pytest.mark.parametrize(("change", "named"), [
    ({"config_hash": "0000000000000000"}, "config_hash"),
    ({"status": "excellent"}, "body field status"),
    ({"problem": {**PROBLEMS_A[1].to_dict(), "head_dim": 100}}, "head dim 100"),
    ({"problem": {**PROBLEMS_A[1].to_dict(), "heads_q": 6, "heads_kv": 4}}, "heads_q"),
    ({"timing": None}, "an OK trial needs timing"),
    ({"build_s": -1}, "body field build_s"),
    ({"device": {"name": ""}}, "body field device"),
    ({"baseline": "x" * 65}, "body field baseline"),
])
def test_post_422_names_what_is_inconsistent(empty_db: str, change: dict, named: str):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(api_settings(db_url=empty_db, api_token=TOKEN))) as client:
        response = client.post("/v1/results", json={**_payload(), **change}, headers=auth)
        assert response.status_code == 422
        assert named in response.json()["detail"]
        assert client.get("/v1/results").json()["total"] == 0


# -- the /v1/best index -----------------------------------------------------------------------


def test_index_keeps_answers_whose_best_did_not_change_and_recomputes_the_rest(tmp_path: Path):
    filled = fill_database(str(tmp_path / "index.db"), with_failures=False)
    store = open_store(filled.url)
    try:
        index = BestIndex(store)
        assert index.refresh() is True and index.refresh() is False
        query = BestQuery(head_dim=128, dtype="fp16", seq=1024, device=DEVICE_A.name)
        first = index.answer(query)
        assert first.status == 200 and index.cached(query) is first
        study = next(s for s in store.studies() if s.problem == PROBLEMS_A[1]
                     and s.device_name == DEVICE_A.name)
        slower = launcher_config(128, 32, 32, 1, 2)
        store.record_trial(study.id, ok_result(PROBLEMS_A[1], slower, 0.1), number=50)
        assert index.refresh() is True
        assert index.cached(query) is first  # the best did not change: carried over
        faster = launcher_config(128, 256, 128, 2, 8)
        trial_id = store.record_trial(study.id, ok_result(PROBLEMS_A[1], faster, 0.9),
                                      number=51)
        assert index.refresh() is True
        after = index.cached(query)
        assert after is not None and after is not first
        assert json.loads(after.body)["trial_id"] == trial_id
        # only the changed problem was read again, and the index holds what a full read gives
        assert index.configs() == export_json(store.best_per_problem()).encode()
    finally:
        store.close()


def test_index_refreshed_after_each_write_answers_as_a_fresh_index(tmp_path: Path):
    filled = fill_database(str(tmp_path / "index.db"), with_failures=False)
    store = open_store(filled.url)
    queries = [BestQuery(head_dim=128, dtype="fp16", seq=seq, mode=mode, causal=causal,
                         device=device)
               for seq in (256, 1024, 3000, 8192) for mode in ("prefill", "decode")
               for causal in (False, True) for device in (DEVICE_A.name, DEVICE_B.name, None)]
    queries += [BestQuery(head_dim=64, dtype="bf16", seq=2048),  # two devices: 422
                BestQuery(head_dim=96, dtype="fp16", seq=512, device=DEVICE_A.name)]  # 404
    study_a = next(s for s in store.studies() if s.problem == PROBLEMS_A[1]
                   and s.device_name == DEVICE_A.name)
    source_id = store.upsert_kernel_source(FAMILY, "benchmark-synthetic")
    newly = ProblemSpec("prefill", 96, "fp16", 512, 512)

    def new_study(problem: ProblemSpec, device=DEVICE_A) -> int:
        return store.get_or_create_study(
            device_id=store.upsert_device(device), kernel_source_id=source_id,
            problem_id=store.upsert_problem(problem), sampler="tpe",
            optuna_study_name=f"test:index:{device.name}:{problem.key()}").id

    writes = [
        # a faster config: the same problem answers, with its new best
        lambda: store.record_trial(study_a.id, ok_result(
            PROBLEMS_A[1], launcher_config(128, 256, 128, 2, 8), 0.9), number=50),
        # a slower one: nothing moves
        lambda: store.record_trial(study_a.id, ok_result(
            PROBLEMS_A[1], launcher_config(128, 32, 32, 1, 2), 0.1), number=51),
        # a newly tuned length: nearer for some queries of its group
        lambda: store.record_trial(new_study(ProblemSpec("prefill", 128, "fp16", 2048, 2048)),
                                   ok_result(ProblemSpec("prefill", 128, "fp16", 2048, 2048),
                                             launcher_config(128, 128, 64, 2, 8), 0.5),
                                   number=0, is_default=True),
        # a 404 gets an answer
        lambda: store.record_trial(new_study(newly), ok_result(
            newly, launcher_config(96, 128, 64, 2, 8), 0.5), number=0, is_default=True),
        # a third device
        lambda: store.record_trial(new_study(PROBLEMS_A[0], DEVICE_A.model_copy(
            update={"name": "Synthetic Xe2 C"})), ok_result(
            PROBLEMS_A[0], launcher_config(128, 128, 64, 2, 8), 0.5), number=0,
            is_default=True),
    ]
    try:
        index = BestIndex(store)
        index.refresh()
        for query in queries:
            index.answer(query)
        for write in writes:
            write()
            assert index.refresh() is True
            fresh = BestIndex(store)
            fresh.refresh()
            for query in queries:
                kept = index.cached(query)
                assert kept is not None, query
                assert (kept.status, kept.body) == (fresh.answer(query).status,
                                                     fresh.answer(query).body), query
        assert index.configs() == export_json(store.best_per_problem()).encode()
    finally:
        store.close()


# -- the CLI commands -----------------------------------------------------------------------


def test_report_writes_one_self_contained_file(filled: FilledDb, tmp_path: Path):
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", "--out", str(out), "--db", filled.url])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert 'id="xe2t-data"' in html and "<script src=" not in html
    embedded = html.split('id="xe2t-embedded">', 1)[1].split("</script>", 1)[0]
    views = json.loads(embedded.replace("<\\/", "</"))
    assert "Plotly" in html and sorted(r["device"] for r in views["rooflines"].values()) == [
        DEVICE_A.name, DEVICE_B.name]
    assert len(views["rows"]) == len(open_store(filled.url).best_per_problem())


def test_report_refuses_a_missing_directory(filled: FilledDb, tmp_path: Path):
    result = CliRunner().invoke(app, ["report", "--out", str(tmp_path / "no" / "r.html"),
                                      "--db", filled.url])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_serve_refuses_a_malformed_database_url_before_binding():
    result = CliRunner().invoke(app, ["serve", "--db", "not a url", "--port", "0"])
    assert isinstance(result.exception, StoreError)
    assert "malformed database URL" in str(result.exception)


# -- docs offline, dashboard views on demand --------------------------------------------------


def test_docs_and_redoc_load_their_assets_from_this_server(client: TestClient):
    for page, assets in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")),
                         ("/redoc", ("redoc.standalone.js",))):
        html = client.get(page).text
        assert "cdn." not in html and "fonts.googleapis" not in html
        for asset in assets:
            assert f"/static/docs/{asset}" in html
            served = client.get(f"/static/docs/{asset}")
            assert served.status_code == 200 and len(served.content) > 10_000


def test_dashboard_summary_counts_without_the_trials(client: TestClient, filled: FilledDb):
    summary = client.get("/dashboard/summary").json()
    assert summary["counts"]["measurements"] == filled.n_trials
    assert summary["counts"]["ok"] == filled.n_ok
    assert [d["name"] for d in summary["devices"]] == [DEVICE_A.name, DEVICE_B.name]
    assert [s[0] for s in summary["studies"]] == filled.study_ids
    assert summary["filters"]["dtype"] == ["bf16", "fp16"]
    assert summary["baselines"] == sorted(BASELINES.values())
    assert "rows" not in summary and "figure" not in json.dumps(summary)


def _page(client: TestClient, **params: object) -> dict:
    response = client.get("/dashboard/best", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_dashboard_best_pages_filter_and_sort_on_the_server(client: TestClient):
    everything = _page(client, limit=500)
    assert everything["total"] == len(PROBLEMS_A) + 1 == len(everything["rows"])
    times = [r["time_ms"] for r in _page(client, sort="time_ms", limit=500)["rows"]]
    assert times == sorted(times)
    slowest = _page(client, sort="time_ms", order="desc", limit=2, offset=1)
    assert [r["time_ms"] for r in slowest["rows"]] == sorted(times, reverse=True)[1:3]
    assert slowest["total"] == len(times)
    fp16 = _page(client, dtype="fp16", device=DEVICE_A.name)
    assert fp16["total"] == sum(p.dtype == "fp16" for p in PROBLEMS_A)
    assert {(r["dtype"], r["device"]) for r in fp16["rows"]} == {("fp16", DEVICE_A.name)}
    assert _page(client, head_dim=64, mode="prefill")["total"] == 2  # on both devices
    assert _page(client, offset=100)["rows"] == []
    row = everything["rows"][0]
    assert row["config"].startswith("QK ") and row["fastest_baseline"] in BASELINES.values()
    assert [b["label"] for b in row["baselines"]] == sorted(BASELINES.values())


@pytest.mark.parametrize(("params", "named"), [
    ({"limit": 0}, "query parameter limit"), ({"limit": 501}, "query parameter limit"),
    ({"offset": -1}, "query parameter offset"), ({"sort": "nope"}, "query parameter sort"),
    ({"order": "up"}, "query parameter order"), ({"head_dim": 100}, "query parameter head_dim"),
    ({"dtype": "int8"}, "query parameter dtype"),
])
def test_dashboard_best_422_names_the_bad_parameter(client: TestClient, params: dict,
                                                    named: str):
    response = client.get("/dashboard/best", params=params)
    assert response.status_code == 422 and response.json()["detail"].startswith(named)


def _array(value: dict | list) -> list:
    """A plotly JSON array: a list, or a typed array in base64 (plotly >= 6)."""
    if isinstance(value, list):
        return value
    return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()


def test_dashboard_roofline_keeps_every_best_and_baseline_when_downsampling(
        client: TestClient, filled: FilledDb):
    store = open_store(filled.url)
    try:
        device = next(d for d in store.devices() if d.name == DEVICE_A.name)
        best_ids = {b.trial_id for b in store.best_per_problem() if b.device_id == device.id}
        frame = store.results_frame()
    finally:
        store.close()
    ok = frame[(frame["device"] == DEVICE_A.name) & (frame["status"] == "ok")]
    baseline_ids = set(ok[ok["baseline"].notna()]["trial_id"].tolist())
    full = client.get(f"/dashboard/roofline/{device.id}").json()
    assert full["n_points"] == full["n_measurements"] == len(ok)
    small = client.get(f"/dashboard/roofline/{device.id}", params={"max_points": 20}).json()
    assert small["n_measurements"] == len(ok) > small["n_points"]
    assert small["caption"].startswith(f"{small['n_points']} points stand for {len(ok)} ")
    for view in (full, small):
        drawn = [i for trace in view["figure"]["data"] if trace["meta"] != "roof"
                 for i in _array(trace["customdata"])]
        assert len(drawn) == len(set(drawn)) == view["n_points"]
        assert best_ids | baseline_ids <= set(drawn)
        assert {"roof", "best", "baseline"} <= {t["meta"] for t in view["figure"]["data"]}
        assert view["figure"]["layout"]["yaxis"]["ticktext"][0].endswith("FLOP/s")
    assert client.get("/dashboard/roofline/999").status_code == 404
    response = client.get(f"/dashboard/roofline/{device.id}", params={"max_points": 5})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("query parameter max_points")


def test_dashboard_study_on_demand(client: TestClient, filled: FilledDb):
    study = client.get(f"/dashboard/study/{filled.study_ids[0]}").json()
    assert study["id"] == filled.study_ids[0] and study["title"].startswith("study ")
    assert {t["name"] for t in study["figure"]["data"]} >= {"trial median", "best so far"}
    assert client.get("/dashboard/study/999999").status_code == 404
    ranked = client.get(f"/dashboard/importance/{filled.study_ids[0]}").json()
    assert ranked["figure"] is not None and ranked["note"] is None
