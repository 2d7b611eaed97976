"""A study's optuna trials as one search process handles them: marked, requeued, recovered.

Optuna knows no "abandoned" state: a trial left RUNNING by a killed search stays RUNNING for
ever, and a FAILed one is a failed config to the samplers. So an asked trial that will not be
measured (a stop, a signal, a killed search found later) goes back to WAITING with its params:
the next ``ask`` of any search pops it first, and its config stays untried, not failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.storages import BaseStorage
    from optuna.trial import FrozenTrial

    from xe2tune.tuner._lease import SearchLease

OWNER_ATTR = "xe2tune_owner"
# A RUNNING trial nobody marked (the search died between optuna's ask and its mark, or an older
# xe2tune asked it) is stale once it started this long ago.
UNOWNED_GRACE_S = 120.0


class TrialBook:
    """Asks, tells and requeues the trials of one optuna study for this process's lease.

    Not thread-safe: the search thread only. Trials are identified by their number.
    """

    def __init__(self, study: optuna.Study, storage: BaseStorage, lease: SearchLease) -> None:
        self.study = study
        self.lease = lease
        self._storage = storage
        self._study_id = storage.get_study_id_from_name(study.study_name)

    def ask(self, distributions: Mapping[str, BaseDistribution]) -> optuna.trial.Trial:
        """The next trial (a requeued one first), marked as this search's.

        Raises:
            SpaceExhaustedError: no config left to propose.
        """
        trial = self.study.ask(dict(distributions))
        trial.set_user_attr(OWNER_ATTR, self.lease.owner)
        return trial

    def tell(self, trial: optuna.trial.Trial, value: float | None) -> None:
        """COMPLETE with ``value``, or FAIL when it is None; nothing if already finished."""
        if value is None:
            self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        else:
            self.study.tell(trial, value, skip_if_finished=True)

    def _trial_id(self, number: int) -> int:
        return self._storage.get_trial_id_from_study_id_trial_number(self._study_id, number)

    def requeue(self, number: int) -> None:
        """Put an asked, untold trial back in the queue: its config stays untried, not failed."""
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

    def recover(self, study_id: int,
                config_hash: Callable[[dict[str, Any]], str | None], *,
                unowned_grace_s: float = UNOWNED_GRACE_S) -> int:
        """Requeue the RUNNING trials of dead searches; return how many were requeued.

        A RUNNING trial nobody marked counts as dead once it started ``unowned_grace_s`` ago,
        or at once when no other search is alive (none can be between its ask and its mark).

        ``config_hash`` maps a trial's params to its config's hash, None when they are not a
        config of the space. A trial killed before any param was chosen is requeued as it is
        (the next ask samples it); one killed while its params were being set is failed, which
        the samplers ignore since it names no config. A stale trial's config is reserved while
        it is requeued, so two searches recovering at once requeue it once; one whose config
        another live search holds is left for later.

        Raises:
            StoreError: the database failed.
        """
        requeued = 0
        live = self.lease.live_owners()
        if live <= {self.lease.owner}:
            unowned_grace_s = 0.0
        for t in self._stale(live, unowned_grace_s):
            if not t.params:  # no config to reserve: the re-read alone guards the requeue
                requeued += self._requeue_if_unchanged(t)
                continue
            digest = config_hash(t.params)
            if digest is None:
                self.study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
                continue
            if self.lease.coordination.reserve_config(
                    study_id, digest, owner=self.lease.owner, trial_number=t.number) is not None:
                continue
            try:
                requeued += self._requeue_if_unchanged(t)
            finally:
                self.lease.coordination.release_config(study_id, digest,
                                                       owner=self.lease.owner)
        return requeued

    def _requeue_if_unchanged(self, stale: FrozenTrial) -> bool:
        """Requeue ``stale`` unless another search requeued or took it since it was read.

        A requeued trial asked again starts anew: its start time tells it from the stale run
        while its new owner has not marked it yet.
        """
        now = self._storage.get_trial(self._trial_id(stale.number))
        if (now.state is not TrialState.RUNNING or now.datetime_start != stale.datetime_start
                or now.user_attrs.get(OWNER_ATTR) != stale.user_attrs.get(OWNER_ATTR)):
            return False
        self.requeue(stale.number)
        return True
