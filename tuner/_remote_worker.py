"""A campaign worker on a host that cannot reach the database.

The studies are reached through optuna's gRPC storage proxy (optuna's ``GrpcStorageProxy``
over TLS with a token on every call, tuner/_grpc_client.py; the server side is optuna's servicer
behind a token gate in ``xe2tune serve --grpc-port``), the measurements go to the API's
token-protected ``POST /v1/results``. Everything the worker
coordinates with others lives in the optuna study itself; its trials are run by the one study
loop through the optuna-storage coordinator (``_storage_coordinator.py``: a heartbeat attribute
per trial, the study's WAITING trials as its budget). Beyond that:

- the campaign's definition is the user attribute of the study ``xe2tune campaign N``;
- a device's study of a problem has the same name as a database worker's; the worker whose
  ``create_new_study`` succeeded enqueues exactly ``trials`` WAITING trials (the default config
  first, the rest empty for the sampler to fill);
- a worker reports itself (host, device, last heartbeat) and its studies in user attributes of
  the campaign's study, which ``campaign status`` reads from the database with the trials each
  worker told (the owner attribute of the finished trials);
- a study is marked as counted by gRPC workers: a database worker (which counts budgets in the
  campaign's slot table) refuses to join it, and a gRPC worker refuses a study it counts;
- the campaign's patience is judged as a database worker judges it, on the study's told trials
  before each pop; the worker that finds it spent marks the study closed, and every worker then
  leaves the study's remaining WAITING trials unrun.

There is no confirmation round on this path: a round is stored through the store's
confirmation table, which the API has no endpoint to write; ``xe2tune search`` or a database
worker on an identical device confirms.
"""

from __future__ import annotations

import functools
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime

import optuna
from optuna.exceptions import DuplicatedStudyError
from optuna.study import StudyDirection

from xe2tune.db import (
    BUDGET_ATTR,
    CAMPAIGN_ATTR,
    CAMPAIGN_STUDY,
    COUNTED_BY_ATTR,
    STUDY_ATTR,
    WORKER_ATTR,
    CampaignRecord,
    DeviceRecord,
    ResultSubmission,
    counted_by,
    mixing_error,
)
from xe2tune.errors import StoreError, TrialAbandoned
from xe2tune.harness import MeasureRequest, TrialResult
from xe2tune.kernels import DeviceCaps, KernelFamily, ProblemSpec
from xe2tune.tuner._coordinator import AskedTrial
from xe2tune.tuner._lease import HEARTBEAT_S, LEASE_TTL_S
from xe2tune.tuner._progress import Outcome, StudyProgress
from xe2tune.tuner._samplers import make_sampler
from xe2tune.tuner._storage_coordinator import StorageTrialCoordinator
from xe2tune.tuner._study import StudyIds, build_space, study_name, study_name_for_space
from xe2tune.tuner._study_loop import TrialLoop
from xe2tune.tuner._trial_runner import TrialRunner

STALE_S = LEASE_TTL_S  # default: a trial silent this long lost its worker
MIN_STALE_S = 3 * HEARTBEAT_S  # shorter would requeue live trials whose beat is merely late
POLL_S = 2.0


def publish_campaign(storage: optuna.storages.BaseStorage, campaign: CampaignRecord) -> None:
    """Put the campaign's definition where gRPC workers read it (called by campaign create)."""
    study = optuna.create_study(study_name=CAMPAIGN_STUDY.format(id=campaign.id),
                                storage=storage, load_if_exists=True)
    study.set_user_attr(CAMPAIGN_ATTR, {
        "name": campaign.name, "sampler": campaign.sampler, "trials": campaign.trials,
        "patience": campaign.patience, "confirm_rounds": campaign.confirm_rounds,
        "created_at": campaign.created_at.isoformat(),
        "problems": [p.to_dict() for p in campaign.problems]})


def load_campaign(storage: optuna.storages.BaseStorage, campaign_id: int) -> CampaignRecord:
    """The campaign's definition as published in the optuna storage.

    Raises:
        StoreError: no campaign with this id was published there.
    """
    try:
        attrs = optuna.load_study(study_name=CAMPAIGN_STUDY.format(id=campaign_id),
                                  storage=storage).user_attrs
        data = attrs[CAMPAIGN_ATTR]
    except KeyError:
        raise StoreError(f"no campaign {campaign_id} behind the gRPC proxy; accepted: an id "
                         "of `xe2tune campaign list` on the database host") from None
    return CampaignRecord(
        id=campaign_id, name=data["name"], sampler=data["sampler"], trials=data["trials"],
        patience=data["patience"], confirm_rounds=data["confirm_rounds"],
        created_at=datetime.fromisoformat(data["created_at"]),
        problems=tuple(ProblemSpec.from_dict(p) for p in data["problems"]))


class ResultPoster:
    """Stores measurements through ``POST /v1/results`` of an ``xe2tune serve``."""

    def __init__(self, api: str, token: str | None,
                 context: ssl.SSLContext | None = None) -> None:
        self.url = api.rstrip("/") + "/v1/results"
        self.token = token
        self.context = context  # verifies the server of an https:// API

    def post(self, submission: ResultSubmission) -> None:
        """Store one trial (idempotent: a config already stored is left alone).

        Raises:
            StoreError: the API refused it or cannot be reached.
        """
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url, method="POST", headers=headers,
                                         data=submission.model_dump_json().encode())
        try:
            with urllib.request.urlopen(request, timeout=60, context=self.context):
                return
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            raise StoreError(f"POST {self.url} answered {exc.code}: {detail}") from None
        except OSError as exc:
            raise StoreError(f"cannot reach {self.url}: {exc}") from None


class WorkerReport:
    """This worker as ``campaign status`` shows it: a user attribute of the campaign's study,
    rewritten at every heartbeat, after every trial and while it waits for work."""

    def __init__(self, storage: optuna.storages.BaseStorage, campaign_id: int, *, owner: str,
                 host: str, pid: int, device: DeviceRecord, stale_after_s: float) -> None:
        self._storage = storage
        self._study_id = storage.get_study_id_from_name(CAMPAIGN_STUDY.format(id=campaign_id))
        self._key = WORKER_ATTR.format(owner=owner)
        self._about = {"owner": owner, "host": host, "pid": pid, "device": device.name,
                       "driver": device.driver, "compute_units": device.compute_units,
                       "stale_after_s": stale_after_s, "started_at": time.time(),
                       "finished_at": None}
        self.beat()

    def beat(self, storage: optuna.storages.BaseStorage | None = None, *,
             finished: bool = False) -> None:
        """Rewrite the report: seen now, finished or not (through ``storage``, a thread's own,
        or the report's)."""
        if finished:
            self._about["finished_at"] = time.time()
        about = {**self._about, "seen_at": time.time()}
        (storage or self._storage).set_study_user_attr(self._study_id, self._key, about)


class RemoteStudy:
    """One device's study of a campaign problem, reached through an optuna storage proxy."""

    def __init__(self, *, make_storage: Callable[[], optuna.storages.BaseStorage],
                 campaign: CampaignRecord, family: KernelFamily, problem: ProblemSpec,
                 caps: DeviceCaps, source_hash: str, device: DeviceRecord,
                 runner: TrialRunner, poster: ResultPoster, report: WorkerReport,
                 owner: str, seed: int | None, stale_after_s: float = STALE_S) -> None:
        self.family, self.problem = family, problem
        self.device, self.source_hash, self.runner, self.poster = (
            device, source_hash, runner, poster)
        self.stale_after_s = stale_after_s
        self.space = build_space(family, problem, caps)
        self.default = family.default_config(problem, caps)
        self.storage = make_storage()
        name = study_name_for_space(self.storage, study_name(
            StudyIds(0, caps.name, 0, source_hash, device.driver, device.compute_units),
            family, problem), self.space)
        self.study = self._open(name, campaign, seed)
        self.coordinator = StorageTrialCoordinator(
            study=self.study, storage=self.storage, make_storage=make_storage, owner=owner,
            space=self.space, config_of=functools.partial(family.config_from_params, problem),
            patience=campaign.patience, stale_after_s=stale_after_s, report=report)
        self.measured = 0  # trials this worker measured and told in the study

    def _open(self, name: str, campaign: CampaignRecord, seed: int | None) -> optuna.Study:
        try:
            study_id = self.storage.create_new_study([StudyDirection.MINIMIZE], name)
            # Marked at once, so a database worker arriving now refuses the study.
            self.storage.set_study_user_attr(study_id, COUNTED_BY_ATTR, "grpc")
            creator = True
        except DuplicatedStudyError:
            creator = False
        study = optuna.load_study(study_name=name, storage=self.storage,
                                  sampler=make_sampler(campaign.sampler, self.space, seed))
        if creator:  # the budget, enqueued once: the default first, then trials to sample
            default = self.family.params_from_config(self.default)
            queued = [default] if self.space.index(default) is not None else []
            for params in (queued + [{}] * campaign.trials)[:campaign.trials]:
                study.enqueue_trial(params)
            study.set_user_attr(BUDGET_ATTR, campaign.trials)
            optuna.load_study(study_name=CAMPAIGN_STUDY.format(id=campaign.id),
                              storage=self.storage).set_user_attr(
                STUDY_ATTR.format(name=name), {
                    "device": self.device.name, "driver": self.device.driver,
                    "compute_units": self.device.compute_units, "family": self.family.name,
                    "problem": self.problem.to_dict()})
        deadline = time.monotonic() + self.stale_after_s
        while BUDGET_ATTR not in study.user_attrs:  # another worker is enqueueing the budget
            counted = counted_by(study)
            if counted not in (None, "grpc"):
                raise StoreError(mixing_error(campaign.id, name, counted))
            if time.monotonic() > deadline:
                raise StoreError(f"study {name!r} exists without its budget (its creator died "
                                 "while enqueueing it); delete the study and start again")
            time.sleep(0.5)
        return study

    def finished(self) -> bool:
        """Every trial of the budget is told, or the study closed early."""
        return self.coordinator.finished()

    def stored_outcome(self, asked: AskedTrial) -> Outcome | None:
        """None: each trial of the budget is its own config, measured by its popper."""
        return None

    def save(self, asked: AskedTrial, result: TrialResult) -> None:
        """Store the measurement through the API (idempotent)."""
        self.poster.post(ResultSubmission.from_result(
            result, device=self.device, family=self.family.name,
            source_hash=self.source_hash, problem=self.problem,
            is_default=asked.config == self.default))

    def run(self, should_stop: Callable[[], bool]) -> None:
        """Run the study's waiting trials until none waits, the study closes or a stop; the
        trials measured add up in ``measured``.

        Raises:
            TrialAbandoned: a stop.
            StoreError: the API refused the result.
            DeviceProcessError: the runner failed.
            In every case the trials held went back to WAITING first.
        """
        progress = StudyProgress(problem=self.problem, space_size=len(self.space),
                                 cartesian_size=self.space.cartesian_size, trial_index=0,
                                 trials_budget=0)
        loop = TrialLoop(self.coordinator, self, self.runner,
                         functools.partial(MeasureRequest, self.family, self.problem),
                         self.default)
        try:
            with self.coordinator.heartbeat():
                loop.run(progress, sys.maxsize, patience=None, deadline=None,
                         observe=lambda _: None, should_stop=should_stop)
        finally:
            self.measured += progress.measured


def run_remote_worker(studies: list[RemoteStudy], report: WorkerReport, *,
                      should_stop: Callable[[], bool], follow: bool = False) -> int:
    """Run the studies' trials until every budget is told (or a stop); trials run.

    Args:
        studies: this device's studies of the campaign's problems, in the order to work on.
        report: this worker's entry in the campaign's study (``campaign status``).
        should_stop: polled between trials; True gives the trial in flight back (WAITING).
        follow: keep polling for work once every budget is told, until ``should_stop``.

    Returns:
        The number of trials this worker measured and told.

    Raises:
        StoreError: the proxy or the API failed.
        DeviceProcessError: the runner failed.
    """
    try:
        while not should_stop():
            for study in studies:
                study.run(should_stop)
            if not follow and all(s.finished() for s in studies):
                break
            report.beat()
            deadline = time.monotonic() + POLL_S
            while time.monotonic() < deadline and not should_stop():
                time.sleep(0.1)
    except TrialAbandoned:
        pass
    report.beat(finished=True)  # a worker that failed instead just stops beating
    return sum(study.measured for study in studies)

