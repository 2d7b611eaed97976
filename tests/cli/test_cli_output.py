"""What the CLI prints fits the terminal, reads right, and is JSON under ``--json``.

The commands run as real processes with ``COLUMNS=80`` (a terminal 80 columns wide) on a real
SQLite file; the printing functions of ``search`` and ``bench`` get real records.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from rich.live import Live
from typer.testing import CliRunner

from xe2tune.cli import _bench, _search, app
from xe2tune.cli._table import Column, print_table
from xe2tune.db import open_store
from xe2tune.harness import TrialStatus
from xe2tune.kernels import ProblemSpec
from xe2tune.testing import launcher_config, ok_result, prefill, tune
from xe2tune.tuner import DEFAULT_SAMPLER, Outcome, StudyProgress, TuneBudget

COMMANDS = ("devices", "roofline", "bench", "inspect", "best", "results", "export", "migrate",
            "replay", "search", "serve", "report")


def run(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from xe2tune.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": str(columns)})


def widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two configs that differ only in a knob, with figures that must print whole."""
    url = f"sqlite:///{tmp_path_factory.mktemp('cli-output')}/results.db"
    store = open_store(url)
    try:
        tune(store, prefill(2048), [ok_result(launcher_config(kv_stage=True), 3.91234e-3),
                                    ok_result(launcher_config(kv_stage=False), 1.23456e-3)])
    finally:
        store.close()
    return url


def test_results_fit_80_columns_with_whole_numbers_and_full_configs(db_url: str) -> None:
    proc = run("results", "--db", db_url)
    assert proc.returncode == 0, proc.stderr
    assert widest(proc.stdout) <= 80, proc.stdout
    assert "3.912" in proc.stdout and "1.235" in proc.stdout and "..." not in proc.stdout
    # the knob that tells the two configs apart is printed for each
    assert "kv_stage=True" in proc.stdout and "kv_stage=False" in proc.stdout
    wide = run("results", "--db", db_url, columns=200)
    assert "roofline" in wide.stdout and "not shown" not in wide.stdout


def test_device_catalog_fits_80_columns() -> None:
    proc = run("devices", "--catalog")
    assert proc.returncode == 0, proc.stderr
    assert widest(proc.stdout) <= 80, proc.stdout
    assert "116.7 / 13.7" in proc.stdout and "Intel(R) Arc(TM) B580 Graphics" in proc.stdout


def test_help_fits_and_shows_no_value_type_for_flags() -> None:
    runner = CliRunner()
    for command in COMMANDS:
        result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.output and "--help" in result.output, command
        assert "--json" in result.output or command not in ("best", "bench", "devices")
        assert widest(result.output) <= 80, (command, result.output)


def test_search_help_names_the_default_sampler() -> None:
    help_text = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "80"}).output
    assert f"default: {DEFAULT_SAMPLER}" in " ".join(help_text.split())


def test_json_errors_are_json_on_stdout(tmp_path: Path, db_url: str) -> None:
    empty = f"sqlite:///{tmp_path}/none.db"
    for args in (("best", "--head-dim", "64", "--dtype", "fp16", "--seq", "128", "--db", empty),
                 ("best", "--head-dim", "128", "--dtype", "fp16", "--seq", "512", "--mode",
                  "decode", "--db", db_url),
                 ("best", "--head-dim", "x", "--dtype", "fp16", "--seq", "512"),
                 ("devices", "--catalog", "--no-such-option")):
        proc = run(*args, "--json")
        assert proc.returncode == 2
        error = json.loads(proc.stdout)["error"]
        assert error and "\n" not in error, proc.stdout
    # without --json the same error is one line on stderr, stdout stays empty
    proc = run("best", "--head-dim", "64", "--dtype", "fp16", "--seq", "128", "--db", empty)
    assert proc.returncode == 2 and proc.stdout == "" and "nothing tuned" in proc.stderr


def test_a_table_drops_optional_columns_and_never_cuts_a_cell() -> None:
    out = io.StringIO()
    columns = (Column("problem"), Column("best", right=True), Column("note", drop=1),
               Column("speedup", right=True))
    rows = [("prefill 16384 causal fp16", "123.456789 ms", "x" * 40, "1.23x")]
    print_table(Console(file=out, width=50), "t", columns, rows, ["a " * 60])
    text = out.getvalue()
    assert widest(text) <= 50
    assert "123.456789 ms" in text and "1.23x" in text and "xxxx" not in text
    assert "not shown at 50 columns: note" in text
    assert text.split().count("a") == 60  # the detail wraps below the row, whole


def _row(seq: int, best_s: float, default_s: float) -> dict:
    config = launcher_config(kv_stage=True).to_dict()
    return {"problem": prefill(seq, causal=True).to_dict(), "best_config": config,
            "best_median_s": best_s, "tflops": 0.0123456, "roofline_fraction": 0.4812,
            "default_median_s": default_s, "speedup_vs_default": default_s / best_s,
            "confirmed_rounds": 4, "skipped": None, "trials": 14, "stored_before": 0,
            "measured": 12, "reused": 2, "failed": 0}


@pytest.mark.parametrize("width", [80, 160])
def test_search_final_table_fits(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    out = io.StringIO()
    monkeypatch.setattr(_search, "console", Console(file=out, width=width))
    _search._print_final([_row(1024, 3.91234e-3, 5.0123e-3), _row(16384, 0.2345, 0.3012)])
    text = out.getvalue()
    assert widest(text) <= width, text
    for figure in ("3.912 ms", "234.5 ms", "48.1%", "1.28x", "kv_stage=True",
                   "confirmed in 4 rounds"):
        assert figure in text, (figure, text)


def test_the_progress_line_estimates_the_whole_run() -> None:
    problem = prefill(1024)
    clock = _search.RunClock(studies=3, budget=TuneBudget(trials=10))
    clock.started = time.perf_counter() - 100.0  # 100 s in, 5 trials of the first study
    first = StudyProgress(problem=problem, space_size=50, cartesian_size=80, trial_index=5,
                          trials_budget=10, phase="measured")
    # 20 s a trial; due: 5 more here and 10 in each of the two studies still to come
    assert clock.remaining(first) == pytest.approx(500.0, rel=0.01)
    assert clock.line(first).startswith("study 1 of 3, 1:40 elapsed, about 8:")
    clock.study_ended(StudyProgress(problem=problem, space_size=50, cartesian_size=80,
                                    trial_index=10, trials_budget=10, phase="done"))
    second = StudyProgress(problem=problem, space_size=4, cartesian_size=8, trial_index=2,
                           trials_budget=10, phase="measuring")
    # 11 trials done in 100 s; due: the one in flight and 2 more of a 4-config space, then 10
    assert clock.remaining(second) == pytest.approx(100.0 / 11 * 13, rel=0.01)
    assert clock.line(second).startswith("study 2 of 3")
    capped = _search.RunClock(studies=3, budget=TuneBudget(trials=10, timeout_s=150.0))
    capped.started = clock.started
    assert capped.remaining(first) == pytest.approx(50.0, abs=1.0)  # --timeout ends it sooner


def test_bench_table_fits_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(_bench, "console", Console(file=out, width=80))
    problem = ProblemSpec(mode="prefill", head_dim=128, dtype="fp16", q_len=2048, kv_len=2048,
                          heads_q=32, heads_kv=8, batch=4, causal=True)
    _bench._print_result(ok_result(launcher_config(kv_stage=True, rows_per_item=8), 3.91e-3),
                         problem)
    text = out.getvalue()
    assert widest(text) <= 80, text
    assert "3.91 ms" in text and "rows_per_item=8" in text


def test_search_prints_a_line_each_time_a_study_s_best_improves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(_search, "console", Console(file=out, width=120))
    view = _search.ProgressView(quiet=False, clock=_search.RunClock(1, TuneBudget(trials=14)))
    view.live = Live(console=_search.console, transient=True)
    problem = prefill(512)

    def outcome(bq: int, median_s: float) -> Outcome:
        return Outcome(TrialStatus.OK, launcher_config(bq=bq), median_s, 0.0123, 0.052, None)

    stored = outcome(16, 0.030)  # a resumed study's best, found before this run
    p = StudyProgress(problem=problem, space_size=50, cartesian_size=80, trial_index=0,
                      trials_budget=14, best=stored)
    view(p)
    for index, best in enumerate((stored, outcome(32, 0.0119), outcome(32, 0.0119),
                                  outcome(64, 0.0101)), start=1):
        p.trial_index, p.best, p.phase = index, best, "measured"
        view(p)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("best so far")]
    assert lines == [
        "best so far prefill seq 512 causal=False: 11.9 ms, 0.0123 TFLOP/s, roofline 5.2% "
        "(trial 2 of 14)",
        "best so far prefill seq 512 causal=False: 10.1 ms, 0.0123 TFLOP/s, roofline 5.2% "
        "(trial 4 of 14)"]
