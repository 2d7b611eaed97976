"""Alembic owns the schema: old databases upgrade with their data, the models match head, and
optuna's tables (with optuna's own alembic_version) are never touched."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from xe2tune.db import BestQuery, migrate_database, open_store
from xe2tune.db._migrate import (
    VERSION_TABLE,
    alembic_config,
    current_revision,
    head_revision,
    include_name,
)
from xe2tune.db._models import Base
from xe2tune.errors import StoreError
from xe2tune.testing import launcher_config, prefill


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "xe2tune.db"


def _insert_at_first_revision(path: Path) -> None:
    """Rows as revision 0001 stored them, written with plain SQL (no models of that era)."""
    config = launcher_config()
    old_form = {k: v for k, v in config.to_dict().items() if k != "family"}  # 0001's to_dict
    problem = prefill(1024)
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO xe2t_devices (id, name, backend, device_type, driver, compute_units, "
        "global_mem_bytes, local_mem_bytes, max_work_group_size, sub_group_sizes, peak_flops, "
        "peak_bandwidth, peak_source, created_at) VALUES (1, 'Old GPU', 'opencl', 'gpu', '1', "
        "8, 1, 1, 256, '[16]', '{\"fp16\": 1e12}', 1e11, 'catalog', '2026-01-01 00:00:00')")
    db.execute("INSERT INTO xe2t_kernel_sources VALUES (1, 'sdpa_prefill', 'h', "
               "'2026-01-01 00:00:00')")
    db.execute("INSERT INTO xe2t_problems (id, key, mode, head_dim, dtype, q_len, kv_len, "
               "heads_q, heads_kv, batch, causal) VALUES (1, ?, 'prefill', 128, 'fp16', 1024, "
               "1024, 8, 8, 1, 0)", (problem.key(),))
    db.execute("INSERT INTO xe2t_studies VALUES (1, 1, 1, 1, 'tpe', 'old', "
               "'2026-01-01 00:00:00')")
    db.execute("INSERT INTO xe2t_trials (id, study_id, number, config, config_hash, status, "
               "is_default, origin, build_s, verify_s, bench_s, error, created_at) VALUES "
               "(1, 1, 0, ?, ?, 'ok', 1, 'local', 1.0, 0.1, 0.2, NULL, '2026-01-01 00:00:00')",
               (json.dumps(old_form), hashlib.sha256(json.dumps(
                   old_form, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]))
    db.execute("INSERT INTO xe2t_measurements (trial_id, median_s, iterations, samples, "
               "passed) VALUES (1, 0.002, 3, '[0.002, 0.002, 0.002]', 1)")
    db.commit()
    db.close()


def test_a_database_at_the_first_revision_upgrades_to_head_with_its_data(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    migrate_database(url, "0001")
    tables = {r[0] for r in sqlite3.connect(db_path).execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "xe2t_trials" in tables and "xe2t_ceilings" not in tables
    _insert_at_first_revision(db_path)

    store = open_store(url)  # upgrades to head on open
    best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=1024))
    assert best is not None and best.median_s == 0.002 and best.device == "Old GPU"
    assert best.launcher_config() == launcher_config()
    assert store.data_version() >= 1
    assert store.ceilings(1) is None
    [trial] = store.trials(best.study_id)
    assert trial.extra == {} and trial.measurement and trial.measurement.samples == (0.002,) * 3
    with sqlite3.connect(db_path) as db:
        assert db.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone() == (
            head_revision(),)


def test_models_match_the_migrated_schema(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    migrate_database(url)
    engine = create_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"include_name": include_name, "compare_type": True,
                         "version_table": VERSION_TABLE})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_every_revision_downgrades_to_base_and_back(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    migrate_database(url)
    engine = create_engine(url)
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
    engine.dispose()
    tables = {r[0] for r in sqlite3.connect(db_path).execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {VERSION_TABLE}
    migrate_database(url)
    assert open_store(url).best_per_problem() == []


def test_optuna_tables_are_left_alone(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    storage = optuna.storages.RDBStorage(url)
    optuna.create_study(storage=storage, study_name="before")
    storage.engine.dispose()
    store = open_store(url)
    store.close()
    with sqlite3.connect(db_path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"studies", "trials", "alembic_version", VERSION_TABLE} <= tables
        optuna_revision = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert optuna_revision is not None and optuna_revision[0] != head_revision()
    assert optuna.load_study(study_name="before", storage=url).study_name == "before"


def test_a_database_from_a_newer_xe2tune_is_refused(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    migrate_database(url)
    with sqlite3.connect(db_path) as db:
        db.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    with pytest.raises(StoreError, match="unknown to this xe2tune"):
        open_store(url)


def test_the_head_read_from_the_files_is_alembics() -> None:
    # Opens compare against head_revision() without loading Alembic; Alembic has the last word.
    script = ScriptDirectory.from_config(alembic_config())
    assert head_revision() == script.get_current_head()
    assert len(list(script.walk_revisions())) == len(
        list((Path(alembic_config().get_main_option("script_location")) / "versions")
             .glob("*.py")))


def test_the_revision_read_without_alembic_is_alembics(db_path: Path) -> None:
    url = f"sqlite:///{db_path}"
    engine = create_engine(url)
    try:
        assert current_revision(engine) is None  # no tables yet
        for revision in ("0001", "head"):
            migrate_database(url, revision)
            with engine.connect() as connection:
                context = MigrationContext.configure(
                    connection, opts={"version_table": VERSION_TABLE})
                assert current_revision(engine) == context.get_current_revision()
        with engine.begin() as connection:  # not a version table an xe2tune migration writes
            connection.execute(text(f"INSERT INTO {VERSION_TABLE} VALUES ('0001')"))
        with pytest.raises(StoreError, match="records 2 schema revisions"):
            current_revision(engine)
    finally:
        engine.dispose()


_OPEN_AT = """
import sys, time
from xe2tune.db import open_store
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # every opener released at one moment
open_store(sys.argv[1]).close()
"""


def test_processes_opening_a_fresh_database_at_once_all_get_it(backend_url: str) -> None:
    """Two searches or workers started together on a new database both migrate it; on
    PostgreSQL 2-3 of 4 such processes failed (duplicate key in pg_type) before migrations
    took an advisory lock (with this test's 3, it failed in 3 of 3 runs); SQLite's write lock
    already queued them."""
    release = time.time() + 3.0  # after the children's imports
    openers = [subprocess.Popen([sys.executable, "-c", _OPEN_AT, backend_url, str(release)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(3)]
    outcomes = [(p.wait(timeout=120), p.stderr.read()) for p in openers]
    assert all(code == 0 for code, _ in outcomes), outcomes
    store = open_store(backend_url)
    try:
        assert store.best_per_problem() == []
    finally:
        store.close()
