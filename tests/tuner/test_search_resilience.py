"""Searches that are killed, stopped or run twice at once lose no config and measure none twice;
the stored best and speedup come from a confirmation round timed side by side.

Real ``xe2tune search`` processes on the real opencl:cpu device, into real SQLite files; the
optuna trial states and the stored trial rows are read back from the file. The problem is a
small decode problem (its space builds in seconds, its trials take about a second); every test
starts from a copy of one database that already holds the device's measured ceilings, so no
search spends a minute measuring them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import optuna
import pytest
from sqlalchemy.exc import SQLAlchemyError

from tests._api_fixtures import running_server, xe2tune_command
from tests._stated_ceilings import store_stated_ceilings
from xe2tune.cli._session import listing_for
from xe2tune.db import BestQuery, LeaseRecord, SqlCoordination, open_store
from xe2tune.harness import TrialStatus
from xe2tune.kernels import (
    DeviceCaps,
    LauncherConfig,
    ProblemSpec,
    family_source_hash,
    get_family,
    search_family,
)
from xe2tune.testing import ok_result, tune
from xe2tune.tuner._lease import SearchLease, pid_running
from xe2tune.tuner._study import StudyIds, study_name

PROBLEM = ["--head-dim", "64", "--mode", "decode", "--seq", "64", "--dtype", "fp16",
           "--heads-q", "4", "--heads-kv", "2"]
QUERY = BestQuery(head_dim=64, dtype="fp16", seq=64, mode="decode", heads_q=4, heads_kv=2)
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory, cpu_queue) -> Path:
    """A migrated database holding this device with stated ceilings (the roof of rooflines)."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    store_stated_ceilings(f"sqlite:///{path}", cpu_queue)
    return path


@pytest.fixture
def db(template_db: Path, tmp_path: Path) -> Path:
    path = tmp_path / "tune.db"
    shutil.copy(template_db, path)
    return path


def start_search(path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [xe2tune_command(), "search", *PROBLEM, "--db", f"sqlite:///{path}", "--json",
         "--sampler", "random", "--seed", "7", "--confirm-rounds", "2", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, dict | None, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, (json.loads(out) if out.strip() else None), err


def rows(path: Path) -> list[tuple[str, str]]:
    """(config_hash, status) of every stored trial."""
    con = sqlite3.connect(path, timeout=30)
    try:
        return con.execute("SELECT config_hash, status FROM xe2t_trials ORDER BY id").fetchall()
    finally:
        con.close()


def optuna_trials(path: Path) -> list[optuna.trial.FrozenTrial]:
    con = sqlite3.connect(path, timeout=30)
    try:
        names = [n for (n,) in con.execute("SELECT optuna_study_name FROM xe2t_studies")]
    finally:
        con.close()
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")
    try:
        return [t for name in names
                for t in optuna.load_study(study_name=name, storage=storage).get_trials()]
    finally:
        storage.remove_session()
        storage.engine.dispose()


def wait_until(predicate, timeout: float = 240, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def in_flight(path: Path) -> bool:
    """True while a trial is being measured after at least two were stored."""
    try:
        running = [t for t in optuna_trials(path)
                   if t.state is optuna.trial.TrialState.RUNNING and t.params]
        return len(rows(path)) >= 2 and bool(running)
    except (sqlite3.Error, SQLAlchemyError, KeyError, ValueError, optuna.exceptions.OptunaError):
        return False  # not yet: the search may be creating optuna's tables as we open them


def assert_nothing_lost(path: Path, in_flight_configs: set[str]) -> None:
    """Every asked config is measured exactly once; none is left RUNNING, WAITING or FAILed
    without a stored failure; the configs in flight at the interruption were measured."""
    stored = rows(path)
    counts = Counter(h for h, _ in stored)
    assert max(counts.values()) == 1
    status = dict(stored)
    trials = optuna_trials(path)
    states = Counter(t.state.name for t in trials)
    assert states["RUNNING"] == 0 and states["WAITING"] == 0, states
    for t in trials:
        assert t.state in FINISHED
        if "config_hash" not in t.user_attrs:
            # killed while its params were being set: failed, naming no config (the samplers
            # ignore it); one killed before any param was chosen was requeued and measured
            assert t.state is optuna.trial.TrialState.FAIL and t.params, t
            continue
        digest = t.user_attrs["config_hash"]
        assert digest in status, f"trial {t.number} names config {digest} that was not stored"
        if t.state is optuna.trial.TrialState.FAIL:
            assert status[digest] != TrialStatus.OK.value, "an OK config told as failed"
    assert in_flight_configs <= set(status), "a config in flight was lost"


def params_in_flight(path: Path) -> list[dict]:
    return [t.params for t in optuna_trials(path)
            if t.state in (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)
            and t.params]


def hashes_of(path: Path, params: list[dict]) -> set[str]:
    """Config hashes of trials' params, from the trials told later with the same params."""
    return {t.user_attrs["config_hash"] for t in optuna_trials(path)
            if t.params in params and "config_hash" in t.user_attrs}


@pytest.mark.requires_xpu
@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGKILL, None), (signal.SIGTERM, 143),
                                           (signal.SIGINT, 130)],
                         ids=["kill-9", "SIGTERM", "SIGINT"])
def test_an_interrupted_search_loses_no_config_and_the_rerun_measures_each_once(
        db: Path, sig: signal.Signals, code: int | None) -> None:
    first = start_search(db, "--trials", "40")
    try:
        wait_until(lambda: in_flight(db), what="a trial in flight")
        os.kill(first.pid, sig)
        returncode, report, err = finish(first, timeout=120)
    finally:
        if first.poll() is None or sig is signal.SIGKILL:
            with_group_killed(first)
    pending = params_in_flight(db)
    assert pending, "the interrupted trial is neither RUNNING nor WAITING"
    if code is not None:  # a graceful stop: the trial in flight went back to the queue
        assert returncode == code and "Traceback" not in err, err
        states = Counter(t.state.name for t in optuna_trials(db))
        assert states["RUNNING"] == 0 and states["WAITING"] >= 1, states
        assert report is not None and report["problems"][0]["confirmed_rounds"] is None
    measured_before = len(rows(db))

    rerun = start_search(db, "--trials", "3")
    returncode, report, err = finish(rerun)
    assert returncode == 0, err
    (row,) = report["problems"]
    # A pending trial stored before the kill but never told is reused, not measured again (the
    # loop keeps runner.prebuild_depth trials asked ahead, so several can be pending).
    assert row["measured"] + row["reused"] >= len(pending) and row["confirmed_rounds"] == 2
    if sig is signal.SIGKILL:
        assert row["requeued"] >= 1
    assert len(rows(db)) == measured_before + row["measured"]
    assert_nothing_lost(db, hashes_of(db, pending))


def with_group_killed(proc: subprocess.Popen) -> None:
    """Kill what is left of the search's process group (its device process) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


@pytest.mark.requires_xpu
@pytest.mark.slow
def test_two_searches_of_one_problem_share_the_work_while_the_api_reads(
        db: Path, tmp_path: Path, cpu_caps: DeviceCaps, cpu_queue) -> None:
    url = f"sqlite:///{db}"
    # The same config queued twice, as a race of two searches enqueueing their warm starts
    # leaves it: both searches pop one copy at about the same time, and one must wait for the
    # other's measurement instead of measuring it again.
    problem = ProblemSpec("decode", 64, "fp16", 1, 64, heads_q=4, heads_kv=2)
    family = search_family(problem, cpu_caps)
    default = family.default_config(problem, cpu_caps)
    twice = next(c for c in family.valid_configs(problem, cpu_caps) if c != default)
    source = family_source_hash(family)
    name = study_name(StudyIds(0, cpu_caps.name, 0, source, listing_for(cpu_queue).driver_version,
                               cpu_caps.compute_units), family, problem)
    study = optuna.create_study(study_name=name, storage=url, direction="minimize")
    for _ in range(2):
        study.enqueue_trial(family.params_from_config(twice))
    errors: list[str] = []
    reads = Counter()
    stop = threading.Event()

    def read_throughout(base: str) -> None:
        paths = ["/v1/results?limit=50", "/v1/studies",
                 "/v1/best?head_dim=64&dtype=fp16&seq=64&mode=decode"]
        while not stop.is_set():
            for path in paths:
                try:
                    with urllib.request.urlopen(base + path, timeout=30) as response:
                        reads[response.status] += 1
                except urllib.error.HTTPError as exc:
                    if exc.code == 404 and path.startswith("/v1/best"):
                        reads[404] += 1  # nothing tuned yet
                    else:
                        errors.append(f"{path}: {exc.code} {exc.read()[:200]!r}")
                except OSError as exc:
                    errors.append(f"{path}: {exc}")
            time.sleep(0.2)

    with running_server(url, tmp_path / "serve.log") as base:
        reader = threading.Thread(target=read_throughout, args=(base,), daemon=True)
        reader.start()
        searches = [start_search(db, "--trials", "5") for _ in range(2)]
        outcomes = [finish(p) for p in searches]
        stop.set()
        reader.join(timeout=60)
    for returncode, _, err in outcomes:
        assert returncode == 0, err
        assert "Traceback" not in err and "error" not in err.lower(), err
    measured = [report["problems"][0]["measured"] for _, report, _ in outcomes]
    reused = [report["problems"][0]["reused"] for _, report, _ in outcomes]
    assert sum(measured) == len(rows(db)), (measured, reused)
    assert sum(reused) >= 1 and twice.config_hash() in dict(rows(db))
    assert errors == [] and reads[200] > 0, (errors, reads)
    assert_nothing_lost(db, set())


@pytest.mark.requires_xpu
@pytest.mark.slow
def test_the_stored_best_and_speedup_come_from_the_confirmation_round(db: Path) -> None:
    returncode, report, err = finish(start_search(db, "--trials", "4", "--confirm-rounds", "3"))
    assert returncode == 0, err
    (row,) = report["problems"]
    assert row["confirmed_rounds"] == 3
    store = open_store(f"sqlite:///{db}")
    try:
        (study,) = store.studies()
        confirmation = store.confirmation(study.id)
        best = store.best(QUERY)
    finally:
        store.close()
    assert confirmation is not None and confirmation.rounds == 3
    default = confirmation.default
    assert default is not None and default.median_s is not None
    assert len(default.round_medians) == 3  # the default was timed in the same round
    assert all(len(e.round_medians) == 3 for e in confirmation.entries if e.median_s)
    winner = confirmation.best
    assert best is not None and best.confirmed_rounds == 3
    assert best.trial_id == winner.trial_id and best.median_s == pytest.approx(winner.median_s)
    assert best.default_median_s == pytest.approx(default.median_s)
    assert best.speedup == pytest.approx(default.median_s / winner.median_s)
    assert best.speedup >= 1.0
    assert row["best_median_s"] == pytest.approx(winner.median_s)
    assert row["speedup_vs_default"] == pytest.approx(best.speedup)


@pytest.mark.requires_xpu
@pytest.mark.slow
def test_an_out_of_grid_best_of_a_neighbour_is_skipped_with_one_warning(
        db: Path, cpu_caps: DeviceCaps) -> None:
    # A best config posted for a neighbouring problem with a tile far outside the grid: the
    # study of this problem starts warm from the neighbour's best, and must skip this one.
    store = open_store(f"sqlite:///{db}")
    try:
        (device,) = store.devices()
        neighbour = ProblemSpec("decode", 64, "fp16", 1, 128, heads_q=4, heads_kv=2)
        config = get_family("sdpa_decode").default_config(neighbour, cpu_caps)
        out_of_grid = LauncherConfig.from_dict(
            {**config.to_dict(), "knobs": {**dict(config.knobs), "rows_per_item": 4096}})
        tune(store, neighbour, [ok_result(out_of_grid, 1e-5)], device=device,
             family="sdpa_decode")
    finally:
        store.close()
    returncode, report, err = finish(start_search(db, "--trials", "1"))
    assert returncode == 0, err
    warnings = [line for line in err.splitlines() if "warm start" in line]
    assert len(warnings) == 1 and out_of_grid.config_hash() in warnings[0], err
    assert report["problems"][0]["measured"] == 1


# -- leases (the reservations' contract: tests/db/test_coordination.py; the trials' kills and
# races: tests/tuner/test_trial_coordination.py) -------------------------------------------------


def test_a_killed_search_on_this_host_is_dead_at_once(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'l.db'}")
    coordination = SqlCoordination(store)
    child = subprocess.Popen(["sleep", "30"])
    try:
        with SearchLease(coordination, heartbeat_s=0.1) as lease:
            later = datetime.now(timezone.utc) + timedelta(minutes=1)
            coordination.hold_lease(LeaseRecord(owner="killed", host=lease.host, pid=child.pid,
                                                expires_at=later))
            assert lease.live_owners() == {lease.owner, "killed"}
            child.kill()
            # A zombie until reaped (the test does not reap it here): dead all the same.
            wait_until(lambda: not pid_running(child.pid), timeout=10, what="the kill")
            assert lease.live_owners() == {lease.owner}
            assert [x.owner for x in coordination.leases()] == [lease.owner]
        assert coordination.leases() == []
    finally:
        child.kill()
        child.wait()
        store.close()
