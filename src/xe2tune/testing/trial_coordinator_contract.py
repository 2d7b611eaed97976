"""The conformance suite of the trial-coordination contract (``xe2tune.tuner.TrialCoordinator``):
kill and race scenarios, run against both implementations (the SQL coordinator of searches and
database workers, the optuna-storage coordinator of gRPC workers) on any database.

A test module subclasses :class:`TrialCoordinatorContract` and provides ``url`` (a fresh
database) and ``kind`` (``"sql"`` or ``"storage"``). Owners killed or signalled are real
processes (this module's :func:`child_main`, started with ``python -c``); owners racing are
threads, each with its own connections (every call is its own transaction). The space is a small
synthetic one: the contract is about trials, not kernels. This module imports pytest.

Every scenario a past commit mended is here:

- dd79ae8: a trial killed between optuna's ask and its owner mark goes back at once when no
  other owner lives (after the grace while one does); one killed before any param was chosen
  is requeued, not failed, one killed while its params were chosen is failed
  (``test_a_kill_between_ask_and_mark_...``, ``test_an_unmarked_trial_waits_the_grace_...``,
  ``test_a_kill_while_params_are_chosen_...``).
- 80453bb: recovery never requeues a trial another owner has just taken again
  (``test_a_stale_owner_coming_back_...``: the requeued trial's new owner keeps it).
- 011b0a3: once the shared budget's patience is spent the study closes for every owner and
  the trial asked ahead is not run; an unmarked orphan left once every slot is spent goes back
  when the confirmation round is claimed (``test_patience_...``, ``test_an_orphan_...``).
- e4cfe91, ea1982c: a gRPC worker killed with its trial in flight leaves it naming its owner
  and the params chosen so far, and it is re-run with them
  (``test_a_kill_between_measure_and_tell_...``, ``test_a_kill_while_params_are_chosen_...``).
- 0c19689: reservations and slots raced for and taken over from dead owners
  (``xe2tune.testing.coordination_contract``, the SQL layer's own suite).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import optuna
import pytest
from optuna.study import StudyDirection
from optuna.trial import TrialState

from xe2tune.db import (
    CAMPAIGN_STUDY,
    CampaignStore,
    SqlCoordination,
    open_optuna_storage,
    open_store,
)
from xe2tune.errors import TrialAbandoned
from xe2tune.harness import MeasureRequest, TrialResult
from xe2tune.kernels import LauncherConfig, get_family
from xe2tune.testing.records import DEVICE, launcher_config, ok_result, prefill, tune
from xe2tune.tuner import (
    AskedTrial,
    FiniteSpace,
    Outcome,
    SearchLease,
    SlotGate,
    SqlTrialCoordinator,
    StorageTrialCoordinator,
    StudyProgress,
    TrialCoordinator,
    TrialLoop,
    WorkerReport,
    make_sampler,
)

SPACE = FiniteSpace.from_params({"bq": (16, 32, 64, 128), "stages": (1, 2, 3)},
                                valid=lambda config: True)
STALE_S = 1.5  # a storage owner silent this long lost its trials (tests only: beats are fast)
BEAT_S = 0.2
RACERS = 6
PROBLEM = prefill(512)


def config_of(params: dict[str, Any]) -> LauncherConfig:
    return launcher_config(bq=params["bq"], stages=params["stages"])


def config_hash(params: dict[str, Any]) -> str | None:
    return None if SPACE.index(params) is None else config_of(params).config_hash()


@dataclass(frozen=True)
class World:
    """One study several owners share, as a child process is told it."""

    kind: str  # "sql" or "storage"
    url: str
    study_name: str
    budget: int | None  # None: a local search (SQL only)
    study_id: int = 0  # SQL: the results study (reservations hang off it)
    campaign_id: int = 0
    link: int = 0  # SQL: the campaign study (its slots)

    @classmethod
    def create(cls, kind: str, url: str, *, budget: int | None,
               patience: int | None = None) -> World:
        name = f"contract-{uuid.uuid4().hex[:8]}"
        if kind == "sql":
            store = open_store(url)
            try:
                study_id = tune(store, PROBLEM, [], source_hash=name)
                optuna.create_study(study_name=name, storage=store.optuna_storage_url())
                if budget is None:
                    return cls(kind, url, name, None, study_id)
                campaigns = CampaignStore(store)
                campaign = campaigns.create(name=name, sampler="random", trials=budget,
                                            patience=patience, confirm_rounds=2,
                                            problems=[PROBLEM])
                return cls(kind, url, name, budget, study_id, campaign.id,
                           campaigns.link_study(campaign.id, study_id))
            finally:
                store.close()
        assert budget is not None, "a storage study's budget is its WAITING trials"
        # The results database a worker's gRPC proxy serves, its schema made here once (the
        # owners open it at head).
        store = open_store(url)
        storage = open_optuna_storage(store)
        try:
            study_id = storage.create_new_study([StudyDirection.MINIMIZE], name)
            study = optuna.load_study(study_name=name, storage=storage)
            for _ in range(budget):
                study.enqueue_trial({})
            if patience is not None:
                storage.set_study_user_attr(study_id, "patience", patience)
            optuna.create_study(study_name=CAMPAIGN_STUDY.format(id=study_id), storage=storage)
            return cls(kind, url, name, budget, campaign_id=study_id)
        finally:
            storage.remove_session()
            storage.engine.dispose()
            store.close()

    def trials(self) -> list[optuna.trial.FrozenTrial]:
        storage = optuna.storages.RDBStorage(self.url)
        try:
            return optuna.load_study(study_name=self.study_name, storage=storage).get_trials()
        finally:
            storage.remove_session()
            storage.engine.dispose()

    def states(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for t in self.trials():
            counts[t.state.name] = counts.get(t.state.name, 0) + 1
        return counts

    @contextmanager
    def owner(self, *, ttl_s: float = 60.0, heartbeat_s: float = BEAT_S,
              stale_after_s: float = STALE_S) -> Iterator[TrialCoordinator]:
        """A new owner of the study (its own connections), gone when the block ends."""
        with ExitStack() as stack:
            sampler = make_sampler("random", SPACE, None)
            if self.kind == "sql":
                store = open_store(self.url)
                stack.callback(store.close)
                coordination = SqlCoordination(store)
                lease = stack.enter_context(SearchLease(coordination, ttl_s=ttl_s,
                                                        heartbeat_s=heartbeat_s))
                storage = open_optuna_storage(store)  # as a search opens it
                stack.callback(storage.engine.dispose)
                study = optuna.load_study(study_name=self.study_name, storage=storage,
                                          sampler=sampler)
                sql = SqlTrialCoordinator(study=study, storage=storage, lease=lease,
                                          study_id=self.study_id, space=SPACE,
                                          config_of=config_of, config_hash=config_hash)
                if self.budget is not None:
                    campaign = CampaignStore(store).get(self.campaign_id)
                    sql.count_budget(SlotGate(coordination, campaign, self.link, lease.owner))
                yield sql
                return
            # Opened as the server behind a worker's gRPC proxy opens it (api/_grpc_proxy.py).
            store = open_store(self.url)
            stack.callback(store.close)
            storage = open_optuna_storage(store)
            stack.callback(storage.engine.dispose)
            study = optuna.load_study(study_name=self.study_name, storage=storage,
                                      sampler=sampler)
            owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}@{socket.gethostname()}"[:64]
            report = WorkerReport(storage, self.campaign_id, owner=owner,
                                  host=socket.gethostname(), pid=os.getpid(), device=DEVICE,
                                  stale_after_s=stale_after_s)
            coordinator = StorageTrialCoordinator(
                study=study, storage=storage,
                make_storage=lambda: open_optuna_storage(store), owner=owner,
                space=SPACE, config_of=config_of,
                patience=study.user_attrs.get("patience"), stale_after_s=stale_after_s,
                report=report, heartbeat_s=heartbeat_s)
            with coordinator.heartbeat():
                yield coordinator


def outcome(asked: AskedTrial, median_s: float) -> Outcome:
    return Outcome.from_result(ok_result(asked.config, median_s))


def wait_until(predicate: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# -- owners in child processes --------------------------------------------------------------


class _BlockingRunner:
    """Measures nothing until abandoned (a SIGTERM): stands for a long trial in flight."""

    prebuild_depth = 1

    def __init__(self) -> None:
        self._abandoned = threading.Event()

    def prebuild(self, request: MeasureRequest) -> None:
        pass

    def measure(self, request: MeasureRequest) -> TrialResult:
        print("ready", flush=True)
        self._abandoned.wait()
        raise TrialAbandoned("stopped")

    def abandon(self) -> None:
        self._abandoned.set()


class NoRecorder:
    """A TrialRecorder that stores nothing and finds nothing stored: the loop's own steps only."""

    def stored_outcome(self, asked: AskedTrial) -> Outcome | None:
        return None

    def save(self, asked: AskedTrial, result: TrialResult) -> None:
        pass


def child_main() -> None:
    """An owner in a process of its own: ``python -c '...child_main()' WORLD_JSON STEP``.

    Steps: ``ask-unmarked`` (optuna's ask, or a storage pop, and nothing more: the window
    between the ask and the owner mark), ``ask-half`` (marked, one param of two chosen),
    ``ask`` (a whole ask, then the measure that never
    ends), ``loop`` (the study loop, measuring until a SIGTERM stops it). It prints ``ready``
    once in its step and waits there to be killed.
    """
    world, step = World(**json.loads(sys.argv[1])), sys.argv[2]
    if step in ("ask-unmarked", "ask-half"):
        storage = optuna.storages.RDBStorage(world.url)
        study = optuna.load_study(study_name=world.study_name, storage=storage)
        if world.kind == "sql":
            trial = study.ask()  # RUNNING, no params, no owner yet
        else:
            waiting = study.get_trials(states=(TrialState.WAITING,))[0]
            trial_id = storage.get_trial_id_from_study_id_trial_number(
                storage.get_study_id_from_name(world.study_name), waiting.number)
            storage.set_trial_state_values(trial_id, TrialState.RUNNING)
            trial = optuna.trial.Trial(study, trial_id)
        if step == "ask-half":  # marked, and killed while its params are chosen one by one
            trial.set_user_attr("xe2tune_owner", "killed")
            trial.suggest_categorical("bq", SPACE.values["bq"])
        print("ready", flush=True)
        time.sleep(600)
    with world.owner() as coordinator:
        if step == "ask":
            asked = coordinator.ask()
            assert asked is not None
            print("ready", asked.trial.number, flush=True)
            time.sleep(600)
        runner = _BlockingRunner()
        signal.signal(signal.SIGTERM, lambda *_: runner.abandon())
        loop = TrialLoop(coordinator, NoRecorder(), runner,
                         lambda config: MeasureRequest(get_family("sdpa_prefill"), PROBLEM,
                                                       config), config_of({"bq": 64,
                                                                           "stages": 2}))
        progress = StudyProgress(problem=PROBLEM, space_size=len(SPACE),
                                 cartesian_size=len(SPACE), trial_index=0, trials_budget=4)
        try:
            loop.run(progress, 4, patience=None, deadline=None, observe=lambda _: None,
                     should_stop=lambda: False)
        except TrialAbandoned:
            sys.exit(143)


@contextmanager
def child(world: World, step: str) -> Iterator[subprocess.Popen]:
    """A child owner at ``step`` (it said ``ready``); killed and reaped when the block ends."""
    code = "from xe2tune.testing.trial_coordinator_contract import child_main; child_main()"
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(asdict(world)), step],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("ready"), proc.stderr.read() if proc.stderr else line
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


class TrialCoordinatorContract:
    """Behaviour both trial coordinators must have on every database."""

    @pytest.fixture
    def url(self) -> str:
        """A fresh, empty database; each test module overrides this."""
        raise NotImplementedError

    @pytest.fixture(params=["sql", "storage"])
    def kind(self, request: pytest.FixtureRequest) -> str:
        return request.param

    def _recovered(self, world: World, owner: TrialCoordinator) -> None:
        """Let ``owner`` recover until a dead owner's trial went back (the storage's
        liveness lapses only after ``STALE_S``)."""
        wait_until(lambda: owner.recover() > 0 or world.states().get("RUNNING", 0) == 0,
                   timeout=30, what="the dead owner's trial requeued")

    # -- asking and telling -----------------------------------------------------------------

    def test_a_budget_is_asked_and_told_once_each(self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=3)
        with world.owner() as owner:
            asked = [owner.ask() for _ in range(3)]
            assert all(a is not None for a in asked)
            assert owner.ask() is None  # every slot held
            for k, a in enumerate(asked):
                assert a is not None
                owner.tell(a, outcome(a, 1e-3 * (k + 1)))
            assert owner.ask() is None  # every slot settled
            assert len({a.digest for a in asked if a is not None}) == 3
        assert world.states() == {"COMPLETE": 3}

    # -- kills ------------------------------------------------------------------------------

    def test_a_kill_between_ask_and_mark_requeues_the_trial_unfailed(
            self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=2)
        with child(world, "ask-unmarked") as proc:
            kill(proc)
        with world.owner() as owner:
            self._recovered(world, owner)
            states = world.states()
            assert "RUNNING" not in states and "FAIL" not in states, states  # requeued
            asked = [owner.ask(), owner.ask()]
            for a in asked:
                assert a is not None
                owner.tell(a, outcome(a, 1e-3))
        assert world.states() == {"COMPLETE": 2}

    def test_a_kill_while_params_are_chosen_fails_no_config_and_keeps_the_chosen_ones(
            self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=1)
        with child(world, "ask-half") as proc:
            kill(proc)
        with world.owner() as owner:
            self._recovered(world, owner)
            (half,) = world.trials()
            if kind == "sql":  # its params name no config: failed, which the samplers ignore
                assert half.state is TrialState.FAIL and list(half.params) == ["bq"]
                return
            assert half.state is TrialState.WAITING  # the budget's own trial: run again
            rerun = owner.ask()
            assert rerun is not None and rerun.trial.params["bq"] == half.params["bq"]

    def test_an_unmarked_trial_waits_the_grace_while_another_search_lives(
            self, url: str, kind: str) -> None:
        if kind != "sql":
            pytest.skip("storage owners are judged by heartbeat, not by who else lives")
        world = World.create(kind, url, budget=None)
        with child(world, "ask-unmarked"), world.owner() as other, world.owner() as owner:
            # ``other`` lives: it may be between its ask and its mark, so the grace applies
            assert owner.recover() == 0 and world.states() == {"RUNNING": 1}
            assert other.ask() is not None
        with world.owner() as owner:  # nobody else lives now: at once
            assert owner.recover() == 2 and world.states() == {"WAITING": 2}

    def test_a_kill_between_measure_and_tell_reruns_the_trial_with_its_params(
            self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=2)
        with child(world, "ask") as proc:
            (killed,) = [t for t in world.trials() if t.state is TrialState.RUNNING]
            kill(proc)
        assert killed.params and killed.user_attrs.get("xe2tune_owner")
        with world.owner() as owner:
            self._recovered(world, owner)
            rerun = owner.ask()
            assert rerun is not None and rerun.trial.number == killed.number
            assert rerun.trial.params == killed.params
            owner.tell(rerun, outcome(rerun, 1e-3))
            last = owner.ask()
            assert last is not None
            owner.tell(last, outcome(last, 2e-3))
            assert owner.ask() is None
        assert world.states() == {"COMPLETE": 2}

    def test_a_sigterm_gives_the_trials_in_flight_back(self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=3)
        with child(world, "loop") as proc:
            assert world.states()["RUNNING"] == 2  # the trial measured and the one asked ahead
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 143, proc.stderr.read() if proc.stderr else ""
        states = world.states()
        assert "RUNNING" not in states and states["WAITING"] >= 2, states
        with world.owner() as owner:  # the slots came back too
            assert all(owner.ask() is not None for _ in range(3))

    # -- races ------------------------------------------------------------------------------

    def test_owners_racing_for_one_trial_get_it_once(self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=1)
        start = threading.Barrier(RACERS)
        answers: list[AskedTrial | None] = []

        def race() -> None:
            with world.owner() as owner:
                start.wait()
                answers.append(owner.ask())
                start.wait()  # every racer asked before any lets go

        threads = [threading.Thread(target=race) for _ in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert len(answers) == RACERS and sum(a is not None for a in answers) == 1

    def test_two_owners_of_one_config_measure_it_once(self, url: str, kind: str) -> None:
        if kind != "sql":
            pytest.skip("storage trials are each their own config: nothing to reserve")
        world = World.create(kind, url, budget=None)
        params = {"bq": 32, "stages": 1}
        storage = optuna.storages.RDBStorage(url)
        study = optuna.load_study(study_name=world.study_name, storage=storage)
        for _ in range(2):  # as two searches enqueueing one warm start at once leave it
            study.enqueue_trial(params)
        storage.engine.dispose()
        stored: set[str] = set()
        with world.owner() as first, world.owner() as second:
            a, b = first.ask(), second.ask()
            assert a is not None and b is not None and a.digest == b.digest
            assert a.holder is None and b.holder == first.owner
            with pytest.raises(TrialAbandoned):
                second.hold(b, lambda: a.digest in stored, should_stop=lambda: True)
            stored.add(a.digest)
            first.tell(a, outcome(a, 1e-3))
            second.hold(b, lambda: b.digest in stored, should_stop=lambda: False)

    def test_a_stale_owner_coming_back_changes_nothing(self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=1)
        # It never beats after its first: its lease lapses after ``ttl_s`` (long enough for its
        # ask on a loaded machine), its trial's heartbeat after the other's ``STALE_S``.
        with world.owner(ttl_s=5.0, heartbeat_s=3600) as stale:
            asked = stale.ask()
            assert asked is not None
            with world.owner() as other:
                time.sleep(5.5)
                self._recovered(world, other)
                taken = other.ask()
                assert taken is not None and taken.trial.number == asked.trial.number
                stale.beat()  # it comes back
                stale.tell(asked, outcome(asked, 1e-3))
                stale.give_back(asked)
                assert world.states() == {"RUNNING": 1}  # still the new owner's
                assert other.recover() == 0  # and no recovery takes it from its new owner
                other.tell(taken, outcome(taken, 2e-3))
        (told,) = world.trials()
        assert told.state is TrialState.COMPLETE and told.value == pytest.approx(2e-3)

    # -- budgets ----------------------------------------------------------------------------

    def test_a_budget_is_spent_exactly_while_owners_join_and_die(
            self, url: str, kind: str) -> None:
        budget = 5
        world = World.create(kind, url, budget=budget)
        told = 0
        with world.owner() as first:
            asked = first.ask()
            assert asked is not None
            first.tell(asked, outcome(asked, 1e-3))
            told += 1
            with child(world, "ask") as one, child(world, "ask") as two:
                kill(one)
                with world.owner() as joined:
                    kill(two)
                    deadline = time.monotonic() + 60
                    while told < budget:
                        assert time.monotonic() < deadline, world.states()
                        for owner in (first, joined):
                            a = owner.ask()
                            if a is None:
                                time.sleep(0.2)  # a dead owner's trial not yet stale
                                continue
                            owner.tell(a, outcome(a, 1e-3 * (told + 1)))
                            told += 1
                    assert first.ask() is None and joined.ask() is None
        assert world.states() == {"COMPLETE": budget}

    def test_patience_spent_closes_the_study_for_every_owner(
            self, url: str, kind: str) -> None:
        world = World.create(kind, url, budget=6, patience=1)
        with world.owner() as owner, world.owner() as other:
            for median_s in (1e-3, 2e-3):
                asked = owner.ask()
                assert asked is not None
                owner.tell(asked, outcome(asked, median_s))
            assert owner.patience_spent() and other.ask() is None
        assert world.states() == {"COMPLETE": 2, "WAITING": 4} if kind == "storage" else {
            "COMPLETE": 2}

    def test_an_orphan_left_once_the_budget_is_spent_goes_back_at_confirmation(
            self, url: str, kind: str) -> None:
        if kind != "sql":
            pytest.skip("storage owners run no confirmation round")
        world = World.create(kind, url, budget=1)
        with world.owner() as owner:
            asked = owner.ask()
            assert asked is not None
            owner.tell(asked, outcome(asked, 1e-3))
            with child(world, "ask-unmarked") as proc:
                kill(proc)
            assert owner.claim_confirmation()
            assert world.states() == {"COMPLETE": 1, "WAITING": 1}
            owner.settle_confirmation()
