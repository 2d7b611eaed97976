"""PostgreSQL as the results database: the store contract, migrations from the first revision,
optuna's storage in the same database, and every read command, the dashboard and every /v1
endpoint of a real ``xe2tune serve`` on it.

Each test gets a database of its own on the PostgreSQL server (``postgres_url`` in conftest).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import optuna
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from tests._api_fixtures import (
    DEVICE_A,
    PROBLEMS_A,
    SOURCE_HASH,
    fill_database,
    running_server,
    submission_payload,
    xe2tune_command,
)
from tests._api_fixtures import launcher_config as api_config
from xe2tune.db import ResultStore, migrate_database, open_store
from xe2tune.db._migrate import VERSION_TABLE, current_revision, head_revision, include_name
from xe2tune.db._models import Base
from xe2tune.testing.store_contract import StoreContract

TOKEN = "postgres-test-token"


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, postgres_url: str) -> ResultStore:
        store = open_store(postgres_url)
        yield store
        store.close()


def test_migrations_run_from_the_first_revision_to_head(postgres_url: str) -> None:
    migrate_database(postgres_url, "0001")
    engine = create_engine(postgres_url)
    try:
        assert current_revision(engine) == "0001"
        migrate_database(postgres_url)
        assert current_revision(engine) == head_revision()
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={
                "version_table": VERSION_TABLE, "include_name": include_name,
                "compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_optuna_shares_the_database_and_readers_never_write(postgres_url: str) -> None:
    store = open_store(postgres_url)
    try:
        study = optuna.create_study(study_name="shared", storage=store.optuna_storage_url())
        study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    finally:
        store.close()
    engine = create_engine(postgres_url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert {"studies", "trials", VERSION_TABLE, "xe2t_trials"} <= tables
    reader = open_store(postgres_url, read_only=True)
    try:
        loaded = optuna.load_study(study_name="shared", storage=optuna.storages.RDBStorage(
            reader.optuna_storage_url(), engine_kwargs=reader.optuna_engine_kwargs()))
        assert len(loaded.trials) == 2
    finally:
        reader.close()


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([xe2tune_command(), *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def filled_postgres(postgres_url: str, tmp_path: Path) -> str:
    fill_database(str(tmp_path / "unused.db"), url=postgres_url)
    return postgres_url


def test_read_commands_work_on_postgresql(filled_postgres: str, tmp_path: Path) -> None:
    url = filled_postgres
    outputs = {}
    for fmt in ("table", "csv", "json"):
        done = _run("results", "--format", fmt, "--db", url)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        outputs[fmt] = done.stdout
    assert "42 results" in outputs["table"]
    assert outputs["csv"].count(DEVICE_A.name) == 36  # six problems of six trials
    rows = json.loads(outputs["json"])
    assert len(rows) == 42 and {r["device"] for r in rows} == {DEVICE_A.name, "Synthetic Xe2 B"}
    best = _run("best", "--head-dim", "128", "--dtype", "fp16", "--seq", "1024", "--json",
                "--device", DEVICE_A.name, "--db", url)
    assert best.returncode == 0, best.stderr
    assert json.loads(best.stdout)["config"]["shape_qk"] == [128, 64, 32]
    for fmt in ("json", "cpp"):
        out = tmp_path / f"best.{fmt}"
        done = _run("export", "--format", fmt, "--out", str(out), "--db", url)
        assert done.returncode == 0 and out.stat().st_size > 0, done.stderr
    report = tmp_path / "report.html"
    done = _run("report", "--out", str(report), "--db", url)
    assert done.returncode == 0, done.stderr
    assert "Synthetic Xe2 A" in report.read_text()


# Query strings for the /v1 GET endpoints that require parameters.
REQUIRED_QUERY = {
    "/v1/best": "head_dim=128&dtype=fp16&seq=1024&device=Synthetic%20Xe2%20A",
    "/v1/export": "format=cpp",
}


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.status, response.read()


def test_the_dashboard_and_every_v1_endpoint_serve_from_postgresql(
        filled_postgres: str, tmp_path: Path) -> None:
    with running_server(filled_postgres, tmp_path / "serve.log", token=TOKEN) as base:
        status, page = _get(base + "/")
        assert status == 200 and b"Synthetic Xe2 A" in page
        paths = json.loads(_get(base + "/openapi.json")[1])["paths"]
        study_id = json.loads(_get(base + "/v1/studies")[1])[0]["id"]
        served = []
        for path, methods in paths.items():
            if not path.startswith("/v1") or "get" not in methods:
                continue
            concrete = path.replace("{study_id}", str(study_id))
            query = REQUIRED_QUERY.get(path)
            status, body = _get(base + concrete + (f"?{query}" if query else ""))
            assert status == 200 and body, path
            served.append(path)
        assert {"/v1/best", "/v1/results", "/v1/studies/{study_id}/trials"} <= set(served)
        payload = submission_payload(PROBLEMS_A[0], api_config(128, 128, 32, 3, 8), 0.7)
        request = urllib.request.Request(
            base + "/v1/results", data=json.dumps(payload).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
        status, body = _get(request)  # type: ignore[arg-type]
        assert status == 201 and json.loads(body)["created"] is True
    store = open_store(filled_postgres, read_only=True)
    try:
        assert store.count_results() == 43
        assert SOURCE_HASH in {r.source_hash for r in store.results(limit=1)}
    finally:
        store.close()
