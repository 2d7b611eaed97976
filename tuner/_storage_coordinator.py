"""The trial coordinator on an optuna storage alone: gRPC workers, which cannot reach the
results database (only optuna's storage proxy and the API).

Everything owners coordinate through lives in the optuna study. Its budget is its trials: the
owner that created the study enqueued exactly ``trials`` WAITING trials, and every owner only
ever pops a WAITING trial (optuna's WAITING -> RUNNING switch is atomic), never creates one, so
the budget is spent exactly. An owner marks each trial it holds with a heartbeat attribute,
renewed on a thread; a RUNNING trial whose heartbeat is older than ``stale_after_s`` lost its
owner and goes back to WAITING with its params. There are no reservations (each budget trial is
its own config) and no confirmation round (it is stored through the database's confirmation
table, which the API cannot write). The rules are :class:`TrialCoordinator`'s.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from xe2tune.db import CLOSED_ATTR
from xe2tune.kernels import LauncherConfig
from xe2tune.tuner._coordinator import (
    OWNER_ATTR,
    PATIENCE_CLOSED,
    AskedTrial,
    patience_spent,
    still_owned,
    tell_outcome,
)
from xe2tune.tuner._lease import HEARTBEAT_S

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

    from xe2tune.tuner._progress import Outcome
    from xe2tune.tuner._remote_worker import WorkerReport
    from xe2tune.tuner._space import FiniteSpace

HEARTBEAT_ATTR = "xe2tune_heartbeat"  # epoch seconds, renewed while the trial is held


class StorageTrialCoordinator:
    """One study's trials for one gRPC worker; see :class:`TrialCoordinator`.

    Args:
        study: the optuna study, with its budget enqueued, on ``storage``.
        storage: the storage (normally a gRPC proxy) the study thread uses.
        make_storage: a storage of its own for the heartbeat thread.
        owner: this worker's owner id (marks the trials it holds).
        space: the study's valid configs (a popped trial's params are suggested from it).
        config_of: a trial's params to its config.
        patience: the campaign's patience (None: none), judged on the study's told trials.
        stale_after_s: a RUNNING trial silent this long lost its owner.
        report: this worker's entry in the campaign (``campaign status``), renewed with every
            beat and counting told trials.
        heartbeat_s: how often :meth:`heartbeat`'s thread beats.
    """

    def __init__(self, *, study: optuna.Study, storage: BaseStorage,
                 make_storage: Callable[[], BaseStorage], owner: str, space: FiniteSpace,
                 config_of: Callable[[dict[str, Any]], LauncherConfig], patience: int | None,
                 stale_after_s: float, report: WorkerReport,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.study, self.storage, self.owner = study, storage, owner
        self._make_storage = make_storage
        self._space, self._config_of = space, config_of
        self._patience, self._stale_after_s, self._report = patience, stale_after_s, report
        self._study_id = storage.get_study_id_from_name(study.study_name)
        self._held: set[int] = set()  # trial ids this owner holds (the heartbeat renews them)
        self._held_lock = threading.Lock()
        self._beat_storage: BaseStorage | None = None
        self._heartbeat_s = heartbeat_s

    @contextlib.contextmanager
    def heartbeat(self) -> Iterator[None]:
        """Renew the held trials' heartbeats (and the worker's report) on a thread, through a
        storage of its own, while the block runs."""
        self._beat_storage = self._make_storage()
        stop = threading.Event()

        def beat_until_stopped() -> None:
            while not stop.wait(self._heartbeat_s):
                self.beat()

        thread = threading.Thread(target=beat_until_stopped, name="xe2tune-heartbeat",
                                  daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            close = getattr(self._beat_storage, "close", None)  # a GrpcStorageProxy's channel
            if close is not None:
                close()
            self._beat_storage = None

    # -- the contract -----------------------------------------------------------------------

    def recover(self) -> int:
        """RUNNING trials whose owner stopped beating go back to WAITING, params kept; each
        only if unchanged since it was read (another owner may have requeued and taken it)."""
        now = time.time()
        requeued = 0
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            beat = t.user_attrs.get(HEARTBEAT_ATTR)
            started = t.datetime_start.timestamp() if t.datetime_start else now
            if now - (beat if isinstance(beat, float) else started) > self._stale_after_s:
                requeued += self._requeue_if_unchanged(t)
        return requeued

    def ask(self) -> AskedTrial | None:
        self.recover()
        if self.patience_spent():
            return None
        popped = self._pop()
        if popped is None:
            return None
        trial, trial_id = popped
        # Marked before its params are suggested one by one: a kill in between leaves a trial
        # that names its owner and the params chosen so far.
        trial.set_user_attr(OWNER_ATTR, self.owner)
        self.storage.set_trial_user_attr(trial_id, HEARTBEAT_ATTR, time.time())
        with self._held_lock:
            self._held.add(trial_id)
        params = {name: trial.suggest_categorical(name, d.choices)
                  for name, d in self._space.distributions().items()}
        config = self._config_of(params)
        return AskedTrial(trial, config, config.config_hash(), trial.datetime_start)

    def hold(self, asked: AskedTrial, stored: Callable[[], bool],
             should_stop: Callable[[], bool]) -> None:
        """Nothing to wait for: each trial of the budget is popped by one owner only."""

    def tell(self, asked: AskedTrial, outcome: Outcome) -> None:
        trial_id = self._let_go(asked)
        if not still_owned(self.storage.get_trial(trial_id), asked, self.owner):
            return
        tell_outcome(self.study, asked, outcome)
        self._report.beat()

    def give_back(self, asked: AskedTrial) -> None:
        trial_id = self._let_go(asked)
        if still_owned(self.storage.get_trial(trial_id), asked, self.owner):
            self.storage.set_trial_state_values(trial_id, TrialState.WAITING)

    def patience_spent(self) -> bool:
        """True when the study closed early (now, if the campaign's patience is spent)."""
        if CLOSED_ATTR in self.storage.get_study_user_attrs(self._study_id):
            return True
        if patience_spent(self.study.get_trials(deepcopy=False), self._patience):
            self.storage.set_study_user_attr(self._study_id, CLOSED_ATTR, PATIENCE_CLOSED)
            return True
        return False

    def claim_confirmation(self) -> bool:
        """Never: the API has no endpoint to store a round (``xe2tune search`` or a database
        worker on an identical device confirms)."""
        return False

    def settle_confirmation(self) -> None:
        """Nothing: no round is ever claimed."""

    def beat(self) -> None:
        storage = self._beat_storage or self.storage
        with self._held_lock:
            held = list(self._held)
        try:
            for trial_id in held:
                storage.set_trial_user_attr(trial_id, HEARTBEAT_ATTR, time.time())
            self._report.beat(storage)
        except Exception:  # noqa: BLE001  (a missed beat is retried; stale is 3+ beats)
            return

    # -- beyond the contract ----------------------------------------------------------------

    def finished(self) -> bool:
        """Every trial of the budget is told, or the study closed early."""
        return self.patience_spent() or all(
            t.state in (TrialState.COMPLETE, TrialState.FAIL)
            for t in self.study.get_trials(deepcopy=False))

    def _trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self._study_id, number)

    def _let_go(self, asked: AskedTrial) -> int:
        """Stop beating ``asked``'s trial; its storage id."""
        trial_id = self._trial_id(asked.trial.number)
        with self._held_lock:
            self._held.discard(trial_id)
        return trial_id

    def _pop(self) -> tuple[optuna.trial.Trial, int] | None:
        """A WAITING trial switched to RUNNING by this owner (the switch is atomic), and its
        storage id."""
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            trial_id = self._trial_id(t.number)
            if self.storage.set_trial_state_values(trial_id, TrialState.RUNNING):
                return optuna.trial.Trial(self.study, trial_id), trial_id
        return None

    def _requeue_if_unchanged(self, stale: FrozenTrial) -> bool:
        trial_id = self._trial_id(stale.number)
        now = self.storage.get_trial(trial_id)
        if (now.state is not TrialState.RUNNING or now.datetime_start != stale.datetime_start
                or now.user_attrs.get(HEARTBEAT_ATTR) != stale.user_attrs.get(HEARTBEAT_ATTR)):
            return False
        return bool(self.storage.set_trial_state_values(trial_id, TrialState.WAITING))
