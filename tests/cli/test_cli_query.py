"""``xe2tune best``, ``results`` and ``export`` via the real entry point on a real SQLite file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xe2tune.cli import main
from xe2tune.db import ResultStore, load_json, open_store
from xe2tune.measurement import TrialStatus
from xe2tune.testing import launcher_config, ok_result, prefill, tune


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'xe2tune.db'}"


@pytest.fixture
def store(db_url: str) -> ResultStore:
    store = open_store(db_url)
    for seq in (512, 2048):
        tune(store, prefill(seq), [ok_result(launcher_config(), 2e-3),
                                   ok_result(launcher_config(128, stages=3), 1e-3)])
    yield store
    store.close()


def xe2tune(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
            *args: str) -> tuple[int, str, str]:
    """Run the console entry point in-process; return (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["xe2tune", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def test_best_exact_as_json(store: ResultStore, db_url: str, capsys, monkeypatch) -> None:
    code, out, _ = xe2tune(capsys, monkeypatch, "best", "--head-dim", "128", "--dtype", "fp16",
                           "--seq", "2048", "--db", db_url, "--json")
    assert code == 0
    answer = json.loads(out)
    assert answer["match"] == "exact" and answer["problem"]["kv_len"] == 2048
    assert answer["config_hash"] == launcher_config(128, stages=3).config_hash()
    assert answer["speedup"] == pytest.approx(2.0)


def test_best_nearest_is_flagged(store: ResultStore, db_url: str, capsys, monkeypatch) -> None:
    code, out, _ = xe2tune(capsys, monkeypatch, "best", "--head-dim", "128", "--dtype", "fp16",
                           "--seq", "1500", "--db", db_url)
    assert code == 0
    assert "NEAREST" in out and "kv_len=2048" in out and "ShapeQK<128,64,32>" in out
    code, out, _ = xe2tune(capsys, monkeypatch, "best", "--head-dim", "128", "--dtype", "fp16",
                           "--seq", "600", "--db", db_url, "--json")
    assert json.loads(out)["match"] == "nearest" and json.loads(out)["problem"]["kv_len"] == 512


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_results_formats(store: ResultStore, db_url: str, capsys, monkeypatch,
                         fmt: str) -> None:
    config = launcher_config(32)
    study = store.studies()[0].id
    store.record_trial(study, ok_result(config, 5e-3).__class__(
        status=TrialStatus.COMPILE_ERROR, config=config, error="boom"))
    code, out, _ = xe2tune(capsys, monkeypatch, "results", "--format", fmt, "--db", db_url)
    assert code == 0
    if fmt == "json":
        rows = json.loads(out)
        assert len(rows) == 5 and rows[0]["status"] == "compile_error"
        assert rows[1]["iterations"] == 5
    elif fmt == "csv":
        lines = out.splitlines()
        assert len(lines) == 6 and "median_s" in lines[0] and "compile_error" in lines[1]
    else:
        assert "5 results" in out and "compile_err" in out and "D128" in out
    code, out, _ = xe2tune(capsys, monkeypatch, "results", "--format", "json", "--status", "ok",
                           "--seq-max", "1000", "--db", db_url)
    assert code == 0 and len(json.loads(out)) == 2


def test_export_json_and_cpp_to_files(store: ResultStore, db_url: str, tmp_path: Path, capsys,
                                      monkeypatch) -> None:
    code, _, _ = xe2tune(capsys, monkeypatch, "export", "--format", "json", "--out",
                         str(tmp_path / "best.json"), "--db", db_url)
    assert code == 0
    assert load_json((tmp_path / "best.json").read_text()) == store.best_per_problem()
    code, out, _ = xe2tune(capsys, monkeypatch, "export", "--format", "cpp", "--db", db_url)
    assert code == 0 and "select_config" in out and "ShapeQK{128, 64, 32}" in out


@pytest.mark.parametrize(("args", "message"), [
    (["export", "--format", "yaml"], "format 'yaml' is not supported; accepted: json, cpp"),
    (["results", "--format", "xml"], "format 'xml' is not supported"),
    (["best", "--head-dim", "100", "--dtype", "fp16", "--seq", "1"], "head_dim 100"),
    (["best", "--head-dim", "128", "--dtype", "fp8", "--seq", "1"], "dtype 'fp8'"),
    (["best", "--head-dim", "128", "--dtype", "fp16", "--seq", "512", "--mode", "decode"],
     "nothing tuned for decode"),
    (["best", "--head-dim", "128", "--dtype", "fp16", "--seq", "512", "--device", "B770"],
     "no device 'B770'"),
])
def test_bad_input_is_one_line_and_exit_2(store: ResultStore, db_url: str, capsys, monkeypatch,
                                          args: list[str], message: str) -> None:
    code, out, err = xe2tune(capsys, monkeypatch, *args, "--db", db_url)
    assert code == 2 and message in err and err.count("\n") == 1 and out == ""


@pytest.mark.parametrize(("make_db", "message"), [
    (lambda tmp: "sqlite:/x", "malformed database URL"),
    (lambda tmp: f"sqlite:///{tmp}/no/such/dir/x.db", "does not exist"),
    (lambda tmp: f"sqlite:///{tmp}", "is a directory"),
])
def test_bad_db_is_one_line_and_exit_2(tmp_path: Path, capsys, monkeypatch, make_db,
                                       message: str) -> None:
    code, _, err = xe2tune(capsys, monkeypatch, "export", "--db", make_db(tmp_path))
    assert code == 2 and message in err and err.count("\n") == 1


def test_empty_database_says_nothing_is_tuned(db_url: str, capsys, monkeypatch) -> None:
    code, _, err = xe2tune(capsys, monkeypatch, "export", "--db", db_url)
    assert code == 2 and "nothing tuned" in err


@pytest.mark.skipif(shutil.which("xe2tune") is None, reason="console script not installed")
def test_console_script_reports_a_malformed_url() -> None:
    run = subprocess.run(["xe2tune", "best", "--head-dim", "128", "--dtype", "fp16", "--seq",
                          "512", "--db", "postgresql://[::1"], capture_output=True, text=True)
    assert run.returncode == 2 and "database URL" in run.stderr
    assert run.stderr.strip().count("\n") == 0
