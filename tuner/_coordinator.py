"""The trial-coordination contract: how the processes sharing one study ask, own, give back and
finish its trials.

Two implementations, one per way of reaching a study:

- :class:`~xe2tune.tuner._sql_coordinator.SqlTrialCoordinator`, on the results database
  (``xe2tune search`` and database workers): liveness is a lease per process
  (``_lease.py``), configs are reserved before they are measured (``db/_reservations.py``), a
  campaign's budget is a table of slots (``_campaign.py``, ``db/_slots.py``); a local search
  is this coordinator without budget slots.
- :class:`~xe2tune.tuner._storage_coordinator.StorageTrialCoordinator`, on an optuna storage
  alone (gRPC workers behind ``xe2tune serve --grpc-port``): liveness is a heartbeat attribute
  on each trial, the budget is the study's WAITING trials.

The study loop (``_study_loop.py``) drives either; its conformance suite is
``xe2tune.testing.coordination_contract``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState

from xe2tune.db import OWNER_ATTR
from xe2tune.kernels import LauncherConfig
from xe2tune.tuner._progress import Outcome

PATIENCE_CLOSED = "patience"
SPACE_CLOSED = "every valid config tried"


@dataclass
class AskedTrial:
    """A trial one owner asked and has not told nor given back yet."""

    trial: optuna.trial.Trial
    config: LauncherConfig
    digest: str  # the config's hash, the key it is reserved, found and stored under
    started: datetime | None  # the trial's start: a requeued trial asked again starts anew
    holder: str | None = None  # another live owner measuring the same config (SQL only)
    slot: int | None = None  # the budget slot the trial runs in (a campaign's)


class TrialCoordinator(Protocol):
    """One owner's handle on one study's trials, shared with other owners (processes, hosts).

    Rules every implementation keeps:

    - **Thread safety.** :meth:`beat` may be called from any thread (an implementation's
      heartbeat thread calls it); every other method from the study thread only. Each call is
      atomic against other owners: two owners never ask the same WAITING trial, never both
      hold one config, never take one budget slot.
    - **Ownership.** A RUNNING trial belongs to the owner whose :meth:`ask` returned it, and to
      nobody else while that owner is live. Only its owner tells it (:meth:`tell`) or gives it
      back (:meth:`give_back`); a trial is never left RUNNING by an owner that stops.
    - **Liveness.** An owner is live while its heartbeat is fresh (:meth:`beat`): a lease
      renewed every few seconds (SQL; on the owner's own host its pid counts too, so a
      SIGKILLed search is dead at once), or a heartbeat attribute on each trial it holds
      (storage).
    - **A dead owner's trial** goes back to WAITING with its params (never FAIL: a failed trial
      is a failed config to the samplers) when :meth:`recover` finds it; the next ask of any
      owner pops it first, and its budget slot is free again. A trial whose params name no
      config of the space is failed (the samplers ignore it).
    - **A stale owner coming back** (declared dead, then live again) no longer owns its trial:
      its :meth:`tell` and :meth:`give_back` of that trial change nothing.
    - **Budget slots.** Where the study has a budget shared by owners (a campaign), every asked
      trial holds one slot of it: settled when the trial is told, freed when it is given back
      or its owner dies. :meth:`ask` answers None once every slot is settled or held, or the
      study closed early (patience, space used up), so the budget is spent exactly however
      many owners join or die. Without a budget (a local search) only the space bounds asks.
    - **Confirmation round.** :meth:`claim_confirmation` is True for one owner only, once
      every slot is settled or the study closed; without a shared budget it is always True for
      the asking owner, and an implementation that cannot store a round answers False.
    """

    owner: str

    def recover(self) -> int:
        """Give the trials of dead owners back to the queue; how many went back.

        Raises:
            StoreError: the storage failed.
        """
        ...

    def ask(self) -> AskedTrial | None:
        """Claim a budget slot, ask the next trial (a given-back one first) and reserve its
        config; None when no slot is free, the study closed or the space is used up.

        Raises:
            StoreError: the storage failed.
        """
        ...

    def hold(self, asked: AskedTrial, stored: Callable[[], bool],
             should_stop: Callable[[], bool]) -> None:
        """Return once this owner holds ``asked``'s config or ``stored()`` says another owner
        stored it (a dead holder's reservation is taken over).

        Raises:
            TrialAbandoned: ``should_stop()`` while waiting.
            StoreError: the storage failed.
        """
        ...

    def tell(self, asked: AskedTrial, outcome: Outcome) -> None:
        """Finish the trial with ``outcome`` (COMPLETE with its objective, else FAIL) and settle
        its slot. When this owner no longer owns the trial nothing is told, and a slot it still
        holds goes back unspent (the trial's new owner spends one).

        Raises:
            StoreError: the storage failed.
        """
        ...

    def give_back(self, asked: AskedTrial) -> None:
        """Put an untold trial back in the queue (its config untried, not failed) and free its
        slot; nothing when this owner no longer owns it.

        Raises:
            StoreError: the storage failed.
        """
        ...

    def patience_spent(self) -> bool:
        """True, and the study closed for every owner, when the shared budget's patience is
        spent on the study's told trials (always False without a shared budget)."""
        ...

    def claim_confirmation(self) -> bool:
        """True when this owner now runs the study's confirmation round."""
        ...

    def settle_confirmation(self) -> None:
        """The confirmation round this owner claimed ran."""
        ...

    def beat(self) -> None:
        """Renew this owner's liveness (any thread). A missed beat is not an error: liveness
        lapses only after several."""
        ...


def patience_spent(trials: Sequence[FrozenTrial], patience: int | None) -> bool:
    """True when the last ``patience`` finished trials, in trial order, improved nothing."""
    if patience is None:
        return False
    best, since = math.inf, 0
    for t in sorted(trials, key=lambda t: t.number):
        if t.state is TrialState.COMPLETE and t.value is not None and t.value < best:
            best, since = t.value, 0
        elif t.state in (TrialState.COMPLETE, TrialState.FAIL):
            since += 1
    return since >= patience


def tell_outcome(study: optuna.Study, asked: AskedTrial, outcome: Outcome) -> None:
    """Finish ``asked`` in the study with the outcome: its attributes, then its objective (or
    FAIL for a failed one); a trial already finished stays as it is."""
    trial = asked.trial
    trial.set_user_attr("config_hash", asked.digest)
    trial.set_user_attr("status", outcome.status.value)
    if outcome.objective < math.inf:
        study.tell(trial, outcome.objective, skip_if_finished=True)
    else:
        trial.set_user_attr("error", (outcome.error or "")[:500])
        study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)


def still_owned(now: FrozenTrial, asked: AskedTrial, owner: str) -> bool:
    """True while ``now`` (the trial re-read) is still ``owner``'s run of ``asked``."""
    return (now.state is TrialState.RUNNING and now.datetime_start == asked.started
            and now.user_attrs.get(OWNER_ATTR) == owner)
