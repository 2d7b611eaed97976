"""Campaigns: budget slots on the store (both backends), the campaign commands, and real worker
processes sharing a campaign on PostgreSQL while one of them is killed with SIGKILL.

The worker test tunes two tiny decode problems (spaces that build in seconds, trials of about a
second) on the opencl:cpu device; the database starts with the device's stated ceilings so no
worker spends a minute measuring them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from sqlalchemy import create_engine, text

from tests._api_fixtures import free_port, running_server, xe2tune_command
from tests._stated_ceilings import store_stated_ceilings
from xe2tune.cli._session import listing_for
from xe2tune.db import (
    COUNTED_BY_ATTR,
    CampaignStore,
    WorkerTokenStore,
    open_store,
)
from xe2tune.errors import StoreError
from xe2tune.kernels import family_source_hash, get_family, search_family
from xe2tune.testing import DEVICE, prefill
from xe2tune.tuner._study import StudyIds, study_name

PROBLEMS = ["--head-dim", "64", "--mode", "decode", "--seq", "64,128", "--dtype", "fp16",
            "--heads-q", "4", "--heads-kv", "2"]
BUDGET = 4
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)


def xe2tune(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([xe2tune_command(), *args], capture_output=True, text=True,
                          timeout=timeout)


# -- campaign studies on the store alone -------------------------------------------------------


def test_devices_differing_only_in_compute_units_tune_studies_of_their_own(
        backend_url: str) -> None:
    store = open_store(backend_url)
    try:
        campaigns = CampaignStore(store)
        problem = prefill(512)
        campaign = campaigns.create(name="cus", sampler="random", trials=2, patience=None,
                                    confirm_rounds=2, problems=[problem])
        family = get_family("sdpa_prefill")
        source_id = store.upsert_kernel_source(family.name, "src-1")
        cut_down = DEVICE.model_copy(update={"compute_units": DEVICE.compute_units // 2})
        links = []
        for device in (DEVICE, cut_down, DEVICE):  # the last joins the first one's study
            ids = StudyIds(store.upsert_device(device), device.name, source_id, "src-1",
                           device.driver, device.compute_units)
            study = store.get_or_create_study(
                device_id=ids.device_id, kernel_source_id=source_id,
                problem_id=store.upsert_problem(problem), sampler="random",
                optuna_study_name=study_name(ids, family, problem))
            links.append(campaigns.link_study(campaign.id, study.id))
        assert links[0] == links[2] != links[1]
        assert len(campaigns.status(campaign.id).studies) == 2
        assert sorted(d.compute_units for d in store.devices()) == [80, 160]
    finally:
        store.close()


def test_campaign_commands_and_their_bad_input(backend_url: str) -> None:
    created = xe2tune("campaign", "create", *PROBLEMS, "--trials", "3", "--name", "c1",
                      "--db", backend_url, "--json")
    assert created.returncode == 0, created.stderr
    campaign = json.loads(created.stdout)
    assert len(campaign["problems"]) == 2 and campaign["trials"] == 3
    again = xe2tune("campaign", "create", *PROBLEMS, "--name", "c1", "--db", backend_url)
    assert again.returncode == 2 and "taken" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr
    listed = json.loads(xe2tune("campaign", "list", "--db", backend_url, "--json").stdout)
    assert [c["name"] for c in listed] == ["c1"]
    status = xe2tune("campaign", "status", "--campaign", str(campaign["id"]), "--db",
                     backend_url, "--json")
    assert json.loads(status.stdout)["studies"] == [], status.stderr
    for args in (["campaign", "status", "--campaign", "99"], ["worker", "--campaign", "99"]):
        missing = xe2tune(*args, "--db", backend_url)
        assert missing.returncode == 2 and "no campaign 99" in missing.stderr, missing.stderr
        assert "1 (c1)" in missing.stderr and "Traceback" not in missing.stderr


def test_remote_worker_options_are_checked_before_anything_runs() -> None:
    for args, expected in (
            (["--grpc", "127.0.0.1:13000"], "--grpc and --api go together"),
            (["--grpc", "tuner.lab", "--api", "http://tuner.lab:8000"], "HOST:PORT"),
            (["--stale-after", "30"], "--stale-after goes with --grpc"),
            (["--grpc", "127.0.0.1:13000", "--api", "http://127.0.0.1:8000", "--stale-after",
              "5"], "accepted: 15 to 86400 seconds"),
            (["--tls-ca", "ca.pem"], "go with --grpc")):
        done = xe2tune("worker", "--campaign", "1", *args)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


# -- real workers ------------------------------------------------------------------------------


def create_campaign(url: str, cpu_queue, *options: str) -> str:
    """The database at ``url`` holding this device with stated ceilings, and a campaign (id 1)
    created with ``options``."""
    store_stated_ceilings(url, cpu_queue)
    created = xe2tune("campaign", "create", *options, "--sampler", "random", "--db", url)
    assert created.returncode == 0, created.stderr
    return url


@pytest.fixture
def campaign_db(postgres_url: str, cpu_queue) -> str:
    """The campaign of PROBLEMS with BUDGET trials per study."""
    return create_campaign(postgres_url, cpu_queue, *PROBLEMS, "--trials", str(BUDGET),
                           "--confirm-rounds", "2")


def worker_env(env: dict[str, str], victim: bool) -> dict[str, str]:
    """``env``, for a victim with the runtime's kernel cache off, so every trial of it compiles.

    With the suite's warm cache and builds asked ahead, a campaign of 2 x BUDGET trials can be
    over in a few seconds, between two polls of kill_in_flight: a trial that compiles keeps the
    victim in flight long enough to be caught. The other workers keep the cache (compiling
    cost each kill test 2 to 5 CPU seconds on a 2-core machine running the suite).
    """
    if not victim:
        return env
    return {**env, "SYCL_CACHE_PERSISTENT": "0"}


def start_worker(url: str, victim: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [xe2tune_command(), "worker", "--campaign", "1", "--db", url, "--device", "opencl:cpu",
         "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=worker_env(dict(os.environ), victim), start_new_session=True)


def optuna_trials(url: str) -> dict[str, list[optuna.trial.FrozenTrial]]:
    """The trials of every tuning study (not the study holding the campaign's definition)."""
    storage = optuna.storages.RDBStorage(url)
    try:
        return {s.study_name: optuna.load_study(study_name=s.study_name, storage=storage)
                .get_trials() for s in optuna.get_all_study_summaries(storage)
                if not s.study_name.startswith("xe2tune campaign ")}
    finally:
        storage.remove_session()
        storage.engine.dispose()


def stored(url: str) -> list[tuple[int, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(r) for r in connection.execute(
                text("SELECT study_id, config_hash FROM xe2t_trials ORDER BY id"))]
    finally:
        engine.dispose()


def owned_trial(url: str, pid: int) -> tuple[str, optuna.trial.FrozenTrial] | None:
    """A trial the worker ``pid`` has asked (with its config) and not told, and its study's
    name."""
    for name, trials in optuna_trials(url).items():
        for t in trials:
            if (t.state is optuna.trial.TrialState.RUNNING and t.params
                    and str(t.user_attrs.get("xe2tune_owner", "")).startswith(f"{pid}-")):
                return name, t
    return None


def rerun_of(studies: dict[str, list[optuna.trial.FrozenTrial]],
             killed: tuple[str, optuna.trial.FrozenTrial]) -> optuna.trial.FrozenTrial:
    """The killed trial as it ended: the same number in the same study, keeping the params
    chosen before the kill (a gRPC worker marks its trial before it suggests the params one by
    one, so the victim may have chosen only some of them)."""
    name, trial = killed
    (rerun,) = [t for t in studies[name] if t.number == trial.number]
    assert trial.params.items() <= rerun.params.items(), (trial.params, rerun.params)
    return rerun


def start_victim_first(start: Callable[[bool], subprocess.Popen], url: str,
                       workers: int) -> list[subprocess.Popen]:
    """``workers`` workers, the first (the victim) alone until it owns a trial.

    Started together, the others can ask every trial of the small budget (each asks two ahead)
    before the victim's first ask, and a victim without a trial has none to be killed in.
    """
    victim = start(True)
    try:
        wait_until(lambda: owned_trial(url, victim.pid), what="the victim's first trial")
    except BaseException:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        raise
    return [victim, *(start(False) for _ in range(workers - 1))]


def kill_in_flight(url: str,
                   worker: subprocess.Popen) -> tuple[str, optuna.trial.FrozenTrial]:
    """SIGKILL the worker's process group while one of its trials runs; return the trial and
    its study's name.

    The group is stopped (SIGSTOP) before the trial is read: a trial read RUNNING from a worker
    still going may be told before the kill lands (trials here take about a second), and the
    test would then check a rerun that never had to happen. Reading PostgreSQL takes no lock a
    stopped worker could hold against it.
    """
    def stopped_in_flight() -> tuple[str, optuna.trial.FrozenTrial] | None:
        # Any trial it owns with its config, from its first on: its trials (tiny problems, builds
        # ahead) can all end between two polls once one is stored, waiting for a stored row
        # first missed the victim in 2 of 6 full runs.
        if owned_trial(url, worker.pid) is None:
            return None
        os.killpg(worker.pid, signal.SIGSTOP)
        trial = owned_trial(url, worker.pid)
        if trial is None:  # told between the two reads: let it go on to the next one
            os.killpg(worker.pid, signal.SIGCONT)
        return trial

    try:
        killed = wait_until(stopped_in_flight, what="a trial of the first worker in flight")
    except AssertionError as exc:  # say what the worker and the studies were doing
        states = {name: Counter((t.state.name, str(t.user_attrs.get("xe2tune_owner", ""))
                                 .split("-")[0]) for t in trials)
                  for name, trials in optuna_trials(url).items()}
        ended = worker.poll()
        err = worker.stderr.read()[-2000:] if ended is not None and worker.stderr else ""
        raise AssertionError(f"{exc}; worker {worker.pid} exit {ended} {err!r}; stored "
                             f"{len(stored(url))}; trials (state, owner pid): {states}") from None
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    return killed


def wait_until(predicate, timeout: float = 300, what: str = ""):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)
    return found


STATUS_EVERY_S = 4


class Readers:
    """Reads the campaign's status and the API throughout, counting errors."""

    def __init__(self, url: str, base: str) -> None:
        self.url, self.base = url, base
        self.errors: list[str] = []
        self.reads = Counter()
        self.most_alive = 0  # workers alive at once, as campaign status showed them
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Readers:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def _run(self) -> None:
        status_due = 0.0
        while not self._stop.is_set():
            # A status process costs about a CPU-second (it loads optuna), taken from the
            # workers under test on a 2-core machine: one every few seconds still sees the
            # workers of these tests (20-30 s) alive together.
            if time.monotonic() >= status_due:
                status_due = time.monotonic() + STATUS_EVERY_S
                self._read_status()
            for path in ("/v1/studies", "/v1/results?limit=50", "/"):
                try:
                    with urllib.request.urlopen(self.base + path, timeout=60) as response:
                        self.reads[response.status] += 1
                except (urllib.error.URLError, OSError) as exc:
                    self.errors.append(f"{path}: {exc}")
            time.sleep(0.5)

    def _read_status(self) -> None:
        status = xe2tune("campaign", "status", "--campaign", "1", "--db", self.url, "--json")
        if status.returncode == 0:
            workers = json.loads(status.stdout)["workers"]
            self.most_alive = max(self.most_alive, sum(w["alive"] for w in workers))
            self.reads["status"] += 1
        else:
            self.errors.append(f"campaign status: {status.stderr.strip()[:300]}")


@pytest.mark.requires_xpu
@pytest.mark.slow
def test_three_workers_spend_the_budget_exactly_and_a_killed_ones_trial_is_rerun(
        campaign_db: str, tmp_path: Path) -> None:
    url = campaign_db
    with running_server(url, tmp_path / "serve.log") as base, Readers(url, base) as readers:
        workers = start_victim_first(lambda victim: start_worker(url, victim), url, 3)
        victim = workers[0]
        try:
            in_flight = kill_in_flight(url, victim)
            outcomes = [(w.communicate(timeout=600), w.returncode) for w in workers[1:]]
        finally:
            for w in workers:
                if w.poll() is None:
                    os.killpg(w.pid, signal.SIGKILL)
                    w.wait()
    for (out, err), code in outcomes:
        assert code == 0 and "Traceback" not in err, (out, err)
    assert readers.errors == [] and readers.reads["status"] > 0 and readers.reads[200] > 0, (
        readers.errors, readers.reads)

    rows = stored(url)
    assert max(Counter(rows).values()) == 1, "a config was measured twice"
    studies = optuna_trials(url)
    assert len(studies) == 2
    for name, trials in studies.items():
        states = Counter(t.state for t in trials)
        # (a trial the victim was asking when killed, before it named a config, is failed by
        # the recovery: told, but not one of the budget's measurements)
        measured = [t for t in trials if t.state in FINISHED and "config_hash" in t.user_attrs]
        assert len(measured) == BUDGET, (name, states)
        assert states[optuna.trial.TrialState.RUNNING] == 0, (name, states)
    rerun = rerun_of(studies, in_flight)
    assert rerun.state in FINISHED, "the killed worker's trial was not re-run"
    assert rerun.user_attrs["xe2tune_owner"] != in_flight[1].user_attrs["xe2tune_owner"]
    assert rerun.user_attrs["config_hash"] in {h for _, h in rows}

    status = json.loads(xe2tune("campaign", "status", "--campaign", "1", "--db", url,
                                "--json").stdout)
    assert status["finished"] is True
    assert [(s["done"], s["budget"], s["confirmed"]) for s in status["studies"]] == [
        (BUDGET, BUDGET, True)] * 2
    by_pid = {w["pid"]: w for w in status["workers"]}
    killed = by_pid[victim.pid]
    assert killed["alive"] is False and killed["finished_at"] is None
    assert killed["last_heartbeat"] is not None  # when it was last seen, for the operator
    assert sum(w["trials_done"] for w in status["workers"]) == 2 * BUDGET


@pytest.mark.requires_xpu
def test_a_worker_refuses_a_study_the_other_kind_of_worker_counts(
        campaign_db: str, cpu_queue, tmp_path: Path) -> None:
    listing = listing_for(cpu_queue)
    store = open_store(campaign_db)
    try:
        problem = CampaignStore(store).get(1).problems[0]
    finally:
        store.close()
    family = search_family(problem, listing.caps)
    name = study_name(StudyIds(0, listing.caps.name, 0, family_source_hash(family),
                               listing.driver_version, listing.caps.compute_units),
                      family, problem)
    optuna.create_study(study_name=name, storage=campaign_db).set_user_attr(
        COUNTED_BY_ATTR, "grpc")
    done = xe2tune("worker", "--campaign", "1", "--db", campaign_db, "--device", "opencl:cpu",
                   "--quiet", timeout=300)
    assert done.returncode == 2 and "is counted by grpc workers" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    # Refused before the study opened: no warm start was enqueued into the gRPC budget.
    study = optuna.load_study(study_name=name, storage=campaign_db)
    assert study.get_trials() == []

    study.set_user_attr(COUNTED_BY_ATTR, "database")
    grpc_port, token = free_port(), "grpc-test-token"
    with running_server(campaign_db, tmp_path / "serve.log", token=token,
                        extra_args=("--grpc-port", str(grpc_port), "--insecure")) as base:
        done = subprocess.run(
            [xe2tune_command(), "worker", "--campaign", "1", "--grpc", f"127.0.0.1:{grpc_port}",
             "--api", base, "--insecure", "--device", "opencl:cpu", "--quiet"],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "XE2TUNE_API_TOKEN": token})
    assert done.returncode == 2 and "is counted by database workers" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert study.get_trials() == []


STALE_AFTER = 15  # seconds: the shortest --stale-after accepted (three heartbeats)


def start_grpc_worker(grpc_port: int, base: str, env: dict[str, str],
                      victim: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [xe2tune_command(), "worker", "--campaign", "1", "--grpc", f"127.0.0.1:{grpc_port}",
         "--api", base, "--insecure", "--device", "opencl:cpu", "--stale-after",
         str(STALE_AFTER), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=worker_env(env, victim), start_new_session=True)


@pytest.mark.requires_xpu
@pytest.mark.slow
def test_grpc_workers_spend_the_budget_exactly_and_a_killed_ones_trial_is_rerun(
        campaign_db: str, tmp_path: Path) -> None:
    url, token = campaign_db, "grpc-test-token"
    grpc_port = free_port()
    # The workers' own database setting points nowhere: everything goes through the server.
    env = {**os.environ, "XE2TUNE_API_TOKEN": token,
           "XE2TUNE_DB": "postgresql+psycopg://nobody@127.0.0.1:1/unreachable"}
    with running_server(url, tmp_path / "serve.log", token=token,
                        extra_args=("--grpc-port", str(grpc_port), "--insecure")) as base, \
            Readers(url, base) as readers:
        workers = start_victim_first(
            lambda victim: start_grpc_worker(grpc_port, base, env, victim), url, 2)
        victim, survivor = workers
        try:
            in_flight = kill_in_flight(url, victim)
            out, err = survivor.communicate(timeout=600)
        finally:
            for w in workers:
                if w.poll() is None:
                    os.killpg(w.pid, signal.SIGKILL)
                    w.wait()
    assert survivor.returncode == 0 and "Traceback" not in err, (out, err)
    assert json.loads(out)["measured"] > 0
    assert readers.errors == [] and readers.most_alive == 2, (readers.errors, readers.reads)

    studies = optuna_trials(url)
    assert len(studies) == 2
    for name, trials in studies.items():
        assert len(trials) == BUDGET and all(t.state in FINISHED for t in trials), name
    rerun = rerun_of(studies, in_flight)
    assert rerun.user_attrs["xe2tune_owner"] != in_flight[1].user_attrs["xe2tune_owner"]
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            origins = Counter(origin for (origin,) in connection.execute(
                text("SELECT origin FROM xe2t_trials")))
    finally:
        engine.dispose()
    assert origins == {"remote": 2 * BUDGET}
    rows = stored(url)
    assert len(set(rows)) == len(rows) == 2 * BUDGET
    assert rerun.user_attrs["config_hash"] in {h for _, h in rows}

    # campaign status reads the gRPC workers and their studies from the database.
    status = json.loads(xe2tune("campaign", "status", "--campaign", "1", "--db", url,
                                "--json").stdout)
    assert status["finished"] is True
    assert [(s["workers"], s["done"], s["budget"], s["running"]) for s in status["studies"]] \
        == [("grpc", BUDGET, BUDGET, 0)] * 2
    assert all(s["best_median_s"] > 0 for s in status["studies"])
    by_pid = {w["pid"]: w for w in status["workers"]}
    assert by_pid[victim.pid]["alive"] is False and by_pid[victim.pid]["finished_at"] is None
    assert by_pid[survivor.pid]["finished_at"] is not None
    assert by_pid[survivor.pid]["trials_done"] == json.loads(out)["measured"]
    assert sum(w["trials_done"] for w in status["workers"]) == 2 * BUDGET


PATIENT_BUDGET = 6


@pytest.mark.requires_xpu
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["database", "grpc"])
def test_a_study_closes_as_soon_as_the_campaigns_patience_is_spent(
        kind: str, postgres_url: str, cpu_queue, tmp_path: Path) -> None:
    url = create_campaign(postgres_url, cpu_queue, *PROBLEMS[:4], "--seq", "64", *PROBLEMS[6:],
                          "--trials", str(PATIENT_BUDGET), "--patience", "1",
                          "--confirm-rounds", "1")
    if kind == "database":
        done = xe2tune("worker", "--campaign", "1", "--db", url, "--device", "opencl:cpu",
                       "--json", timeout=600)
    else:
        token, grpc_port = "grpc-test-token", free_port()
        env = {**os.environ, "XE2TUNE_API_TOKEN": token,
               "XE2TUNE_DB": "postgresql+psycopg://nobody@127.0.0.1:1/unreachable"}
        with running_server(url, tmp_path / "serve.log", token=token,
                            extra_args=("--grpc-port", str(grpc_port), "--insecure")) as base:
            worker = start_grpc_worker(grpc_port, base, env)
            out, err = worker.communicate(timeout=600)
        done = subprocess.CompletedProcess(worker.args, worker.returncode, out, err)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr

    (trials,) = optuna_trials(url).values()
    told = [t for t in sorted(trials, key=lambda t: t.number) if t.state in FINISHED]
    best, first_stale = float("inf"), None
    for i, t in enumerate(told):  # patience 1: the first told trial that improves nothing
        if t.state is optuna.trial.TrialState.COMPLETE and t.value < best:
            best = t.value
        elif first_stale is None:
            first_stale = i
    (study,) = json.loads(xe2tune("campaign", "status", "--campaign", "1", "--db", url,
                                  "--json").stdout)["studies"]
    assert study["workers"] == kind and study["finished"] is True
    if first_stale is None:  # every trial improved: the whole budget ran
        assert len(told) == PATIENT_BUDGET and study["closed"] is None
    else:
        assert len(told) == first_stale + 1, [(t.number, t.state, t.value) for t in told]
        assert study["closed"] == "patience" and study["done"] == len(told)
    rows = stored(url)
    assert rows and max(Counter(rows).values()) == 1, "a config was measured twice"
    if kind == "grpc":  # (a database worker also stores its seeded baselines)
        assert len(rows) == len(told)


def test_worker_tokens_are_stored_hashed_and_revoked_per_campaign(backend_url: str) -> None:
    store = open_store(backend_url)
    try:
        campaign = CampaignStore(store).create(name="tokens", sampler="random", trials=1,
                                               patience=None, confirm_rounds=1,
                                               problems=[prefill(512)])
        tokens = WorkerTokenStore(store)
        minted = tokens.create(campaign.id, "host-a")
        assert tokens.find(minted.secret) == minted.record and not minted.record.revoked
        assert tokens.find(minted.secret + "x") is None
        engine = create_engine(backend_url)
        try:
            with engine.connect() as connection:
                stored_form = connection.execute(
                    text("SELECT token_sha256 FROM xe2t_worker_tokens")).scalar_one()
        finally:
            engine.dispose()
        assert minted.secret not in stored_form and len(stored_form) == 64
        with pytest.raises(StoreError, match="has no token 99"):
            tokens.revoke(campaign.id, 99)
        with pytest.raises(StoreError, match=f"has no token {minted.record.id}"):
            tokens.revoke(campaign.id + 1, minted.record.id)  # another campaign's id
        revoked = tokens.revoke(campaign.id, minted.record.id)
        assert revoked.revoked and tokens.find(minted.secret).revoked
        assert tokens.revoke(campaign.id, minted.record.id) == revoked  # the first time stays
        assert tokens.list(campaign.id) == [revoked]
        with pytest.raises(StoreError, match="no campaign 99"):
            tokens.create(99, "nobody")
    finally:
        store.close()
