"""Kernel families and seeded baselines in the database. Revision 0003 on real SQLite files:
trials gain their kernel family (backfilled from the study's kernel source) and a baseline label;
stored configs are rewritten with "family" and rehashed, and a downgrade gives back the old
configs and hashes byte for byte. ``xe2tune best`` shows the baselines beside the best."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine

from xe2tune.cli import main
from xe2tune.cli._app import console
from xe2tune.db import BestQuery, migrate_database, open_store
from xe2tune.db._migrate import alembic_config
from xe2tune.harness import TrialStatus
from xe2tune.kernels import LauncherConfig, ProblemSpec
from xe2tune.testing import failed_result, launcher_config, ok_result, prefill, tune

DECODE = ProblemSpec(mode="decode", head_dim=128, dtype="fp16", q_len=1, kv_len=4096,
                     heads_q=32, heads_kv=8)


def _old_form(config: LauncherConfig) -> dict[str, Any]:
    """A config as revision 0002's code stored it: the to_dict form without "family"."""
    return {k: v for k, v in config.to_dict().items() if k != "family"}


def _old_hash(form: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(form, sort_keys=True, separators=(",", ":")).encode()
                          ).hexdigest()[:16]


# (trial id, study id, config, status, median): study 1 is prefill (source sdpa_prefill),
# study 2 decode (source sdpa_decode).
OLD_TRIALS = (
    (1, 1, launcher_config(64, 64), "ok", 2e-3),
    (2, 1, launcher_config(128, 32, 3, unroll=4, variant="split", dpas=True), "ok", 1e-3),
    (3, 1, launcher_config(32, 32), "compile_error", None),
    (4, 2, launcher_config(16, 64, 1, family="sdpa_decode", kv_chunk=512), "ok", 5e-4),
)


def _fill_at_0002(path: Path) -> None:
    """Rows as revision 0002 stored them, written with plain SQL (no models of that era)."""
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO xe2t_devices (id, name, backend, device_type, driver, compute_units, "
        "global_mem_bytes, local_mem_bytes, max_work_group_size, sub_group_sizes, peak_flops, "
        "peak_bandwidth, peak_source, created_at) VALUES (1, 'Old GPU', 'opencl', 'gpu', '1', "
        "8, 1, 1, 256, '[16]', '{\"fp16\": 1e12}', 1e11, 'catalog', '2026-01-01 00:00:00')")
    for source_id, family in ((1, "sdpa_prefill"), (2, "sdpa_decode")):
        db.execute("INSERT INTO xe2t_kernel_sources VALUES (?, ?, 'h', '2026-01-01 00:00:00')",
                   (source_id, family))
    for problem_id, problem in ((1, prefill(1024)), (2, DECODE)):
        db.execute("INSERT INTO xe2t_problems (id, key, mode, head_dim, dtype, q_len, kv_len, "
                   "heads_q, heads_kv, batch, causal) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (problem_id, problem.key(), *problem.to_dict().values()))
        db.execute("INSERT INTO xe2t_studies VALUES (?, 1, ?, ?, 'tpe', ?, "
                   "'2026-01-01 00:00:00')", (problem_id, problem_id, problem_id,
                                              f"old-{problem_id}"))
    for trial_id, study_id, config, status, median in OLD_TRIALS:
        form = _old_form(config)
        db.execute("INSERT INTO xe2t_trials (id, study_id, number, config, config_hash, status, "
                   "is_default, origin, build_s, verify_s, bench_s, error, created_at, extra) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, 'local', 1.0, 0.1, 0.2, NULL, "
                   "'2026-01-01 00:00:00', '{}')",
                   (trial_id, study_id, trial_id, json.dumps(form), _old_hash(form), status,
                    trial_id == 1))
        if median is not None:
            db.execute("INSERT INTO xe2t_measurements (trial_id, median_s, iterations, samples, "
                       "passed) VALUES (?, ?, 1, ?, 1)", (trial_id, median, f"[{median}]"))
    db.commit()
    db.close()


def _trial_columns(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return {row[1]: row[3] for row in db.execute("PRAGMA table_info(xe2t_trials)")}


def _stored(path: Path) -> list[tuple[int, dict[str, Any], str]]:
    with sqlite3.connect(path) as db:
        return [(i, json.loads(c), h) for i, c, h in db.execute(
            "SELECT id, config, config_hash FROM xe2t_trials ORDER BY id")]


def _downgrade(url: str, revision: str) -> None:
    engine = create_engine(url)
    config = alembic_config()
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()


@pytest.fixture
def old_db(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "xe2tune.db"
    url = f"sqlite:///{path}"
    migrate_database(url, "0002")
    _fill_at_0002(path)
    return url, path


def _assert_upgraded(url: str, path: Path) -> None:
    assert _trial_columns(path)["family"] == 1  # NOT NULL after the backfill
    stored = _stored(path)
    for (trial_id, config, config_hash), (_, _, expected, _, _) in zip(stored, OLD_TRIALS,
                                                                       strict=True):
        assert config == expected.to_dict(), trial_id
        assert config_hash == expected.config_hash(), trial_id
    store = open_store(url)
    try:
        rows = {row.trial_id: row for row in store.results()}
        assert {i: (r.family, r.baseline) for i, r in rows.items()} == {
            1: ("sdpa_prefill", None), 2: ("sdpa_prefill", None), 3: ("sdpa_prefill", None),
            4: ("sdpa_decode", None)}
        found = store.find_trial(1, OLD_TRIALS[1][2].config_hash())
        assert found is not None and found.id == 2 and found.family == "sdpa_prefill"
        best = store.best(BestQuery(head_dim=128, dtype="fp16", seq=1024))
        assert best is not None and best.trial_id == 2 and best.speedup == pytest.approx(2.0)
        assert best.launcher_config() == OLD_TRIALS[1][2] and best.baselines == ()
        decode = store.best(BestQuery(head_dim=128, dtype="fp16", seq=4096, mode="decode"))
        assert decode is not None and decode.family == "sdpa_decode"
        assert decode.launcher_config() == OLD_TRIALS[3][2]
    finally:
        store.close()


def test_upgrade_backfills_the_family_and_rehashes_every_stored_config(
        old_db: tuple[str, Path]) -> None:
    url, path = old_db
    assert "family" not in _trial_columns(path)
    migrate_database(url)
    _assert_upgraded(url, path)
    with sqlite3.connect(path) as db:
        indexes = {row[1] for row in db.execute("PRAGMA index_list(xe2t_trials)")}
    assert {"ix_xe2t_trials_family_status", "ix_xe2t_trials_study_baseline"} <= indexes


def test_downgrade_restores_the_old_configs_and_hashes_and_upgrades_again(
        old_db: tuple[str, Path]) -> None:
    url, path = old_db
    before = _stored(path)
    migrate_database(url)
    _downgrade(url, "0002")
    assert {"family", "baseline"}.isdisjoint(_trial_columns(path))
    assert _stored(path) == before
    assert [h for _, _, h in before] == [_old_hash(_old_form(c)) for _, _, c, _, _ in OLD_TRIALS]
    migrate_database(url)
    _assert_upgraded(url, path)


def test_baseline_labels_survive_reopening_and_downgrade_drops_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'xe2tune.db'}"
    store = open_store(url)
    sage = launcher_config(256, family="sdpa_xmx_prefill")
    tune(store, prefill(512), [ok_result(sage, 1e-3)], family="sdpa_prefill+sdpa_xmx_prefill",
         baselines={0: "seed 000 SageV1"})
    store.close()
    reopened = open_store(url)
    [row] = reopened.results()
    assert (row.family, row.baseline, row.config_hash) == (
        "sdpa_xmx_prefill", "seed 000 SageV1", sage.config_hash())
    reopened.close()
    _downgrade(url, "0002")
    [(_, config, config_hash)] = _stored(tmp_path / "xe2tune.db")
    assert config == _old_form(sage) and config_hash == _old_hash(_old_form(sage))


def test_downgrade_refuses_one_config_stored_in_two_families(tmp_path: Path) -> None:
    path = tmp_path / "xe2tune.db"
    url = f"sqlite:///{path}"
    store = open_store(url)
    tune(store, prefill(512), [ok_result(launcher_config(), 1e-3),
                               ok_result(launcher_config(family="sdpa_xmx_prefill"), 2e-3)])
    store.close()
    before = _stored(path)
    with pytest.raises(RuntimeError, match="holds one config in two families"):
        _downgrade(url, "0002")
    assert _stored(path) == before and "family" in _trial_columns(path)


def test_best_and_results_commands_show_family_and_baselines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'xe2tune.db'}"
    store = open_store(url)
    sage, onednn = (launcher_config(256, family="sdpa_xmx_prefill", grf=256),
                    launcher_config(32, family="sdpa_xmx_prefill", grf=128))
    tuned = launcher_config(128, family="sdpa_xmx_prefill", grf=128)
    tune(store, prefill(1024), [
        ok_result(sage, 3e-3), failed_result(onednn, TrialStatus.COMPILE_ERROR, "no"),
        ok_result(launcher_config(), 4e-3), ok_result(tuned, 1e-3)],
        family="sdpa_prefill+sdpa_xmx_prefill",
        baselines={0: "seed 000 SageV1", 1: "oneDNN default"})
    store.close()

    monkeypatch.setattr(console, "width", 200)  # no wrapping inside the asserted lines

    def run(*args: str) -> str:  # the console entry point, in-process
        monkeypatch.setattr(sys, "argv", ["xe2tune", *args, "--db", url])
        with pytest.raises(SystemExit) as exit_info:
            main()
        out, err = capsys.readouterr()
        assert not exit_info.value.code, err
        return out

    query = ("best", "--head-dim", "128", "--dtype", "fp16", "--seq", "1024")
    text = run(*query)
    assert "sdpa_xmx_prefill · exact match" in text
    assert "vs seed 000 SageV1 (sdpa_xmx_prefill): 3 ms, best is 3x faster" in text
    assert "vs oneDNN default (sdpa_xmx_prefill): compile_error" in text
    answer = json.loads(run(*query, "--json"))
    assert answer["family"] == "sdpa_xmx_prefill" and answer["baseline"] is None
    assert [(b["label"], b["speedup"]) for b in answer["baselines"]] == [
        ("oneDNN default", None), ("seed 000 SageV1", pytest.approx(3.0))]
    table = run("results")
    assert "sdpa_xmx_prefill ShapeQK<256,64,32>" in table
    assert "(baseline seed 000 SageV1)" in table and "sdpa_prefill ShapeQK<64,64,32>" in table
