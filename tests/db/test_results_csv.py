"""``xe2tune results --format csv`` streams from the database and prints what the whole-table
path printed (the chunking itself is in the store contract: ``results_frames``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from xe2tune.cli import main
from xe2tune.db import ResultFilters, open_store, results_csv
from xe2tune.measurement import TrialStatus
from xe2tune.testing import failed_result, launcher_config, ok_result, prefill, tune


@pytest.fixture
def csv(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """``xe2tune results --format csv --db URL ...`` through the console entry point: stdout."""
    def run(url: str, *args: str) -> str:
        monkeypatch.setattr(sys, "argv", ["xe2tune", "results", "--format", "csv", "--db", url,
                                          *args])
        with pytest.raises(SystemExit) as info:
            main()
        out, err = capsys.readouterr()
        assert info.value.code in (0, None) and err == "", err
        return out
    return run


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'xe2tune.db'}"
    store = open_store(url)
    for seq in (512, 2048):
        tune(store, prefill(seq), [ok_result(launcher_config(), 2e-3),
                                   ok_result(launcher_config(128, stages=3), 1e-3),
                                   ok_result(launcher_config(256), 3e-3)],
             baselines={2: "oneDNN default"})
    store.close()
    return url


def test_csv_is_the_csv_of_the_whole_table(db_url: str, csv) -> None:
    store = open_store(db_url, read_only=True)
    frame = store.results_frame()
    short = store.results_frame(ResultFilters(seq_max=1000))
    store.close()
    # what ``results --format csv`` printed before it streamed (every trial measured)
    assert csv(db_url) == frame.drop(columns=["config"]).to_csv(index=False)
    assert csv(db_url, "--limit", "4") == frame.head(4).drop(columns=["config"]).to_csv(
        index=False)
    assert csv(db_url, "--seq-max", "1000") == results_csv(short)


def test_csv_prints_integers_as_integers_beside_failed_trials(db_url: str, csv) -> None:
    store = open_store(db_url)
    study = store.studies()[0].id
    store.record_trial(study, failed_result(launcher_config(32), TrialStatus.COMPILE_ERROR,
                                            "boom"))
    frame = store.results_frame()
    store.close()
    out = csv(db_url)
    lines = out.splitlines()
    assert out == results_csv(frame) and len(lines) == 8
    header = lines[0].split(",")
    newest, measured = (dict(zip(header, line.split(","), strict=True)) for line in lines[1:3])
    assert newest["status"] == "compile_error" and newest["warmup"] == ""
    assert (measured["warmup"], measured["iterations"]) == ("3", "5")  # not 3.0 (pandas NaN)


def test_csv_of_nothing_is_its_header(tmp_path: Path, csv) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    open_store(url).close()
    out = csv(url)
    assert out.count("\n") == 1 and out.startswith("trial_id,created_at,device,")
