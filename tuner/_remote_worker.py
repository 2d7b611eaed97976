"""A campaign worker on a host that cannot reach the database.

The studies are reached through optuna's gRPC storage proxy (optuna's ``GrpcStorageProxy``
over TLS with a token on every call, tuner/_grpc_client.py; the server side is optuna's servicer
behind a token gate in ``xe2tune serve --grpc-port``), the measurements go to the API's
token-protected ``POST /v1/results``. Everything the worker
coordinates with others lives in the optuna study itself:

- the campaign's definition is the user attribute of the study ``xe2tune campaign N``;
- a device's study of a problem has the same name as a database worker's, and its budget is its
  trials: the worker whose ``create_new_study`` succeeded enqueues exactly ``trials`` WAITING
  trials (the default config first, the rest empty for the sampler to fill), and every worker
  only ever pops a WAITING trial (optuna's WAITING -> RUNNING switch is atomic), never creates
  one, so the budget is spent exactly;
- a worker marks the trial it runs with a heartbeat user attribute; a RUNNING trial whose
  heartbeat is older than ``stale_after_s`` (its worker died) goes back to WAITING with its params
  and is re-run by whoever pops it next;
- a worker reports itself (host, device, last heartbeat, trials told) and its studies in user
  attributes of the campaign's study, which ``campaign status`` reads from the database;
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

import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime

import optuna
from optuna.exceptions import DuplicatedStudyError
from optuna.study import StudyDirection
from optuna.trial import TrialState

from xe2tune.db import (
    BUDGET_ATTR,
    CAMPAIGN_ATTR,
    CAMPAIGN_STUDY,
    CLOSED_ATTR,
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
from xe2tune.harness import MeasureRequest, TrialStatus
from xe2tune.kernels import DeviceCaps, KernelFamily, ProblemSpec
from xe2tune.tuner._campaign import PATIENCE_CLOSED, patience_spent
from xe2tune.tuner._lease import HEARTBEAT_S, LEASE_TTL_S
from xe2tune.tuner._samplers import make_sampler
from xe2tune.tuner._study import StudyIds, build_space, study_name
from xe2tune.tuner._trial_runner import TrialRunner
from xe2tune.tuner._trials import OWNER_ATTR

HEARTBEAT_ATTR = "xe2tune_heartbeat"  # epoch seconds, renewed while the trial runs
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
                       "finished_at": None, "trials_done": 0}
        self.beat()

    def beat(self, storage: optuna.storages.BaseStorage | None = None, *, told: int = 0,
             finished: bool = False) -> None:
        """Rewrite the report: seen now, ``told`` more trials, finished or not (through
        ``storage``, a thread's own, or the report's)."""
        self._about["trials_done"] += told
        if finished:
            self._about["finished_at"] = time.time()
        about = {**self._about, "seen_at": time.time()}
        (storage or self._storage).set_study_user_attr(self._study_id, self._key, about)


class _Heartbeat:
    """Renews a trial's heartbeat attribute (and the worker's report) on a thread, through a
    storage of its own."""

    def __init__(self, make_storage: Callable[[], optuna.storages.BaseStorage],
                 trial_id: int, report: WorkerReport) -> None:
        self._storage = make_storage()
        self._trial_id = trial_id
        self._report = report
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="xe2tune-heartbeat",
                                        daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._storage.set_trial_user_attr(self._trial_id, HEARTBEAT_ATTR, time.time())
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        close = getattr(self._storage, "close", None)  # a GrpcStorageProxy holds a channel
        if close is not None:
            close()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._storage.set_trial_user_attr(self._trial_id, HEARTBEAT_ATTR, time.time())
                self._report.beat(self._storage)
            except Exception:  # noqa: BLE001  (a missed beat is retried; stale is 3+ beats)
                continue


class RemoteStudy:
    """One device's study of a campaign problem, reached through an optuna storage proxy."""

    def __init__(self, *, make_storage: Callable[[], optuna.storages.BaseStorage],
                 campaign: CampaignRecord, family: KernelFamily, problem: ProblemSpec,
                 caps: DeviceCaps, source_hash: str, device: DeviceRecord,
                 runner: TrialRunner, poster: ResultPoster, report: WorkerReport,
                 owner: str, seed: int | None, stale_after_s: float = STALE_S) -> None:
        self.make_storage, self.family, self.problem, self.caps = (
            make_storage, family, problem, caps)
        self.device, self.source_hash, self.runner, self.poster, self.owner = (
            device, source_hash, runner, poster, owner)
        self.report, self.stale_after_s = report, stale_after_s
        self.patience = campaign.patience
        self.space = build_space(family, problem, caps)
        self.default = family.default_config(problem, caps)
        self.storage = make_storage()
        name = study_name(StudyIds(0, caps.name, 0, source_hash, device.driver,
                                   device.compute_units), family, problem)
        self.study = self._open(name, campaign, seed)
        self._study_id = self.storage.get_study_id_from_name(name)

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
        return self._closed() or all(t.state in (TrialState.COMPLETE, TrialState.FAIL)
                                     for t in self.study.get_trials(deepcopy=False))

    def _closed(self) -> bool:
        """The study closed early (now, if the campaign's patience is spent)."""
        if CLOSED_ATTR in self.storage.get_study_user_attrs(self._study_id):
            return True
        if patience_spent(self.study.get_trials(deepcopy=False), self.patience):
            self.storage.set_study_user_attr(self._study_id, CLOSED_ATTR, PATIENCE_CLOSED)
            return True
        return False

    def _trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self._study_id, number)

    def _requeue_stale(self) -> None:
        """RUNNING trials whose worker stopped beating go back to WAITING, params kept."""
        now = time.time()
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            beat = t.user_attrs.get(HEARTBEAT_ATTR)
            started = t.datetime_start.timestamp() if t.datetime_start else now
            if now - (beat if isinstance(beat, float) else started) > self.stale_after_s:
                self.storage.set_trial_state_values(self._trial_id(t.number), TrialState.WAITING)

    def _pop(self) -> tuple[optuna.trial.Trial, int] | None:
        """A WAITING trial switched to RUNNING by this worker (the switch is atomic), and its
        storage id."""
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            trial_id = self._trial_id(t.number)
            if self.storage.set_trial_state_values(trial_id, TrialState.RUNNING):
                return optuna.trial.Trial(self.study, trial_id), trial_id
        return None

    def step(self) -> bool:
        """Run one trial of the budget; False when none is waiting or the study closed.

        Raises:
            TrialAbandoned: a stop.
            StoreError: the API refused the result.
            DeviceProcessError: the runner failed.
            In every case the trial went back to WAITING first.
        """
        self._requeue_stale()
        if self._closed():
            return False
        popped = self._pop()
        if popped is None:
            return False
        trial, trial_id = popped
        trial.set_user_attr(OWNER_ATTR, self.owner)
        try:
            with _Heartbeat(self.make_storage, trial_id, self.report):
                params = {name: trial.suggest_categorical(name, d.choices)
                          for name, d in self.space.distributions().items()}
                config = self.family.config_from_params(self.problem, params)
                result = self.runner.measure(MeasureRequest(self.family, self.problem, config))
                self.poster.post(ResultSubmission.from_result(
                    result, device=self.device, family=self.family.name,
                    source_hash=self.source_hash, problem=self.problem,
                    is_default=config == self.default))
        except BaseException:  # a stop, a refused POST, a failed runner: back to the queue
            self.storage.set_trial_state_values(trial_id, TrialState.WAITING)
            raise
        trial.set_user_attr("config_hash", result.config_hash)
        trial.set_user_attr("status", result.status.value)
        ok = result.status is TrialStatus.OK and result.timing is not None
        if ok:
            self.study.tell(trial, result.timing.median)
        else:
            trial.set_user_attr("error", (result.error or "")[:500])
            self.study.tell(trial, state=TrialState.FAIL)
        self.report.beat(told=1)
        return True


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
    ran = 0
    try:
        while not should_stop():
            for study in studies:
                while not should_stop() and study.step():
                    ran += 1
            if not follow and all(s.finished() for s in studies):
                break
            report.beat()
            deadline = time.monotonic() + POLL_S
            while time.monotonic() < deadline and not should_stop():
                time.sleep(0.1)
    except TrialAbandoned:
        pass
    report.beat(finished=True)  # a worker that failed instead just stops beating
    return ran

