"""The trial coordinator on the results database: ``xe2tune search`` and database workers.

Liveness is the process's lease (``_lease.py``); a config is reserved under it before it is
measured, so two owners of one study never measure the same config; in a campaign each trial
first claims a slot of the study's budget (``_campaign.py``). Optuna knows no "abandoned"
state: a trial left RUNNING by a killed owner would stay RUNNING for ever, and a FAILed one is a
failed config to the samplers; so an untold trial goes back to WAITING with its params, and the
next ask of any owner pops it first. The rules are :class:`TrialCoordinator`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from xe2tune.errors import TrialAbandoned
from xe2tune.kernels import LauncherConfig
from xe2tune.tuner._coordinator import (
    OWNER_ATTR,
    PATIENCE_CLOSED,
    SPACE_CLOSED,
    AskedTrial,
    patience_spent,
    still_owned,
    tell_outcome,
)
from xe2tune.tuner._finite_sampler import SpaceExhaustedError

if TYPE_CHECKING:
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

    from xe2tune.tuner._campaign import SlotGate
    from xe2tune.tuner._lease import SearchLease
    from xe2tune.tuner._progress import Outcome
    from xe2tune.tuner._space import FiniteSpace

# A RUNNING trial nobody marked (its owner died between optuna's ask and its mark, or an older
# xe2tune asked it) is stale once it started this long ago.
UNOWNED_GRACE_S = 120.0
POLL_S = 0.5  # how often an owner waiting on a config another owner measures looks again


class SqlTrialCoordinator:
    """One study's trials for this process's lease; see :class:`TrialCoordinator`.

    Args:
        study: the optuna study, on ``storage``.
        storage: the results database's optuna storage.
        lease: this process's lease (its ``owner`` marks the trials it asks).
        study_id: the study's row in the results database (reservations hang off it).
        space: the study's valid configs (asks stop once each was asked).
        config_of: a trial's params to its config.
        config_hash: a trial's params to its config's hash; None when they name no config of
            the space.
    """

    def __init__(self, *, study: optuna.Study, storage: BaseStorage, lease: SearchLease,
                 study_id: int, space: FiniteSpace,
                 config_of: Callable[[dict[str, Any]], LauncherConfig],
                 config_hash: Callable[[dict[str, Any]], str | None]) -> None:
        self.study, self.lease, self.study_id = study, lease, study_id
        self.owner = lease.owner
        self._storage = storage
        self._optuna_study_id = storage.get_study_id_from_name(study.study_name)
        self._space = space
        self._config_of, self._config_hash = config_of, config_hash
        self._gate: SlotGate | None = None

    def count_budget(self, gate: SlotGate) -> None:
        """Share a campaign's budget from now on: each trial first claims one of its slots."""
        self._gate = gate

    # -- the contract -----------------------------------------------------------------------

    def recover(self, *, unowned_grace_s: float = UNOWNED_GRACE_S) -> int:
        """Requeue the RUNNING trials of dead owners; how many were requeued.

        A RUNNING trial nobody marked counts as dead once it started ``unowned_grace_s`` ago,
        or at once when no other owner is alive (none can be between its ask and its mark).
        A trial killed before any param was chosen is requeued as it is (the next ask samples
        it); one killed while its params were being set is failed, which the samplers ignore
        since it names no config. A stale trial's config is reserved while it is requeued, so
        two owners recovering at once requeue it once; one whose config another live owner
        holds is left for later.

        Raises:
            StoreError: the database failed.
        """
        requeued = 0
        live = self.lease.live_owners()
        if live <= {self.owner}:
            unowned_grace_s = 0.0
        coordination = self.lease.coordination
        for t in self._stale(live, unowned_grace_s):
            if not t.params:  # no config to reserve: the re-read alone guards the requeue
                requeued += self._requeue_if_unchanged(t)
                continue
            digest = self._config_hash(t.params)
            if digest is None:
                self.study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
                continue
            if coordination.reserve_config(self.study_id, digest, owner=self.owner,
                                           trial_number=t.number) is not None:
                continue
            try:
                requeued += self._requeue_if_unchanged(t)
            finally:
                coordination.release_config(self.study_id, digest, owner=self.owner)
        return requeued

    def ask(self) -> AskedTrial | None:
        slot = None
        if self._gate is not None:
            self.recover()  # a slot a dead owner held re-runs its trial
            if self.patience_spent():
                return None
            slot = self._gate.claim_trial()
            if slot is None:
                return None
        trials = self.study.get_trials(deepcopy=False)
        taken = {self._space.index(t.params) for t in trials} - {None}
        waiting = any(t.state is TrialState.WAITING for t in trials)
        trial = None
        if len(taken) < len(self._space) or waiting:
            try:
                trial = self.study.ask(self._space.distributions())
            except SpaceExhaustedError:  # another owner took the last configs meanwhile
                pass
        if trial is None:
            if self._gate is not None and slot is not None:
                self._gate.free(slot)
                self._gate.close(SPACE_CLOSED)
            return None
        trial.set_user_attr(OWNER_ATTR, self.owner)
        config = self._config_of(trial.params)
        digest = config.config_hash()
        holder = self.lease.coordination.reserve_config(
            self.study_id, digest, owner=self.owner, trial_number=trial.number)
        return AskedTrial(trial, config, digest, trial.datetime_start, holder, slot)

    def hold(self, asked: AskedTrial, stored: Callable[[], bool],
             should_stop: Callable[[], bool]) -> None:
        while asked.holder is not None:
            if stored():
                return
            if should_stop():
                raise TrialAbandoned("stopped while another search measured the config")
            time.sleep(POLL_S)
            self.lease.live_owners()  # releases a holder that died, so the config frees up
            asked.holder = self.lease.coordination.reserve_config(
                self.study_id, asked.digest, owner=self.owner, trial_number=asked.trial.number)

    def tell(self, asked: AskedTrial, outcome: Outcome) -> None:
        if not self._owns(asked):  # its slot, if still this owner's, goes back unspent
            self._let_go(asked)
            return
        tell_outcome(self.study, asked, outcome)
        if self._gate is not None and asked.slot is not None:
            self._gate.settle(asked.slot, asked.trial.number)
        self._release(asked)

    def give_back(self, asked: AskedTrial) -> None:
        if self._owns(asked):
            self._requeue(asked.trial.number)
        self._let_go(asked)

    def patience_spent(self) -> bool:
        if self._gate is None:
            return False
        if patience_spent(self.study.get_trials(deepcopy=False), self._gate.campaign.patience):
            self._gate.close(PATIENCE_CLOSED)
            return True
        return False

    def claim_confirmation(self) -> bool:
        if self._gate is None:
            return True
        if not self._gate.claim_confirmation():
            return False
        if not self._gate.others_hold_slots():
            # Nobody can be asking a trial now: a trial left RUNNING unmarked (its owner was
            # killed between optuna's ask and the mark) goes back at once.
            self.recover(unowned_grace_s=0)
        return True

    def settle_confirmation(self) -> None:
        if self._gate is not None:
            self._gate.settle_confirmation()

    def beat(self) -> None:
        self.lease.beat()

    # -- the optuna side --------------------------------------------------------------------

    def _trial_id(self, number: int) -> int:
        return self._storage.get_trial_id_from_study_id_trial_number(self._optuna_study_id,
                                                                     number)

    def _owns(self, asked: AskedTrial) -> bool:
        now = self._storage.get_trial(self._trial_id(asked.trial.number))
        return still_owned(now, asked, self.owner)

    def _let_go(self, asked: AskedTrial) -> None:
        """Free the trial's slot (nothing when another owner took it over) and its config."""
        if self._gate is not None and asked.slot is not None:
            self._gate.free(asked.slot)
        self._release(asked)

    def _release(self, asked: AskedTrial) -> None:
        if asked.holder is None:
            self.lease.coordination.release_config(self.study_id, asked.digest,
                                                   owner=self.owner)

    def _requeue(self, number: int) -> None:
        trial_id = self._trial_id(number)
        self._storage.set_trial_user_attr(trial_id, OWNER_ATTR, "")
        self._storage.set_trial_state_values(trial_id, TrialState.WAITING)

    def _stale(self, live: set[str], unowned_grace_s: float) -> list[FrozenTrial]:
        cutoff = datetime.now() - timedelta(seconds=unowned_grace_s)  # optuna stores local time
        stale = []
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            owner = t.user_attrs.get(OWNER_ATTR)
            if owner:
                if owner not in live:
                    stale.append(t)
            elif t.datetime_start is not None and t.datetime_start < cutoff:
                stale.append(t)
        return stale

    def _requeue_if_unchanged(self, stale: FrozenTrial) -> bool:
        """Requeue ``stale`` unless another owner requeued or took it since it was read.

        A requeued trial asked again starts anew: its start time tells it from the stale run
        while its new owner has not marked it yet.
        """
        now = self._storage.get_trial(self._trial_id(stale.number))
        if (now.state is not TrialState.RUNNING or now.datetime_start != stale.datetime_start
                or now.user_attrs.get(OWNER_ATTR) != stale.user_attrs.get(OWNER_ATTR)):
            return False
        self._requeue(stale.number)
        return True
