"""What a campaign's gRPC workers leave in the optuna storage, read back from the database.

A worker behind ``xe2tune serve --grpc-port`` reaches nothing but the optuna storage proxy (and
``POST /v1/results``), so it reports itself where that proxy writes: user attributes of the
campaign's own optuna study (``xe2tune campaign N``), one key per worker and per device study.
The proxy's storage is this database, so ``campaign status`` reads them here with the campaign
tables. The attribute names are defined here, the side that reads them; the worker imports them.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from xe2tune.db._campaigns import CampaignWorkerStatus
from xe2tune.kernels import ProblemSpec

if TYPE_CHECKING:
    import optuna

CAMPAIGN_STUDY = "xe2tune campaign {id}"  # the optuna study holding a campaign's definition
CAMPAIGN_ATTR = "campaign"
# On a trial: the owner that popped it last; a finished trial's owner told it, which is how
# ``campaign status`` counts each worker's trials (from the trials, not from the worker's report,
# which a kill between a tell and the next report would leave one short).
OWNER_ATTR = "xe2tune_owner"
WORKER_ATTR = "worker {owner}"  # a gRPC worker: where it runs, its last heartbeat
STUDY_ATTR = "study {name}"  # a device's study run by gRPC workers: device and problem
BUDGET_ATTR = "xe2tune_slots"  # on a device study: its budget, once enqueued by its creator
# On a device study: who counts its budget, "grpc" (enqueued WAITING trials) or "database"
# (the campaign's slot table). The two cannot share a study: each would spend its own budget.
COUNTED_BY_ATTR = "xe2tune_counted_by"
# On a device study: why it ended before its budget (e.g. "patience"); its WAITING trials stay
# unrun.
CLOSED_ATTR = "xe2tune_closed"


@dataclass(frozen=True)
class RemoteStudyStatus:
    """A device's study of a campaign problem run by gRPC workers: trials told and running, the
    budget, why it closed early (None: it did not), the best median so far. No confirmation
    round runs on this path."""

    name: str
    device: str
    driver: str
    compute_units: int
    family: str
    problem: ProblemSpec
    done: int
    running: int
    budget: int
    closed: str | None
    best_median_s: float | None

    @property
    def finished(self) -> bool:
        return self.closed is not None or self.done >= self.budget


def _when(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, timezone.utc)


def remote_progress(storage: optuna.storages.BaseStorage, campaign_id: int
                    ) -> tuple[tuple[RemoteStudyStatus, ...], tuple[CampaignWorkerStatus, ...]]:
    """The campaign's studies and workers on the gRPC path, as its workers reported them."""
    import optuna  # with the first campaign read, not with every import of xe2tune.db
    from optuna.trial import TrialState

    try:
        attrs = optuna.load_study(study_name=CAMPAIGN_STUDY.format(id=campaign_id),
                                  storage=storage).user_attrs
    except KeyError:  # not published (a database made before campaigns reached gRPC)
        return (), ()
    studies = []
    told_by: Counter[str] = Counter()
    for key, about in sorted(attrs.items()):
        if not key.startswith(STUDY_ATTR.format(name="")):
            continue
        name = key[len(STUDY_ATTR.format(name="")):]
        study = optuna.load_study(study_name=name, storage=storage)
        trials = study.get_trials(deepcopy=False)
        states = [t.state for t in trials]
        values = [t.value for t in trials if t.state is TrialState.COMPLETE]
        told_by.update(t.user_attrs.get(OWNER_ATTR) for t in trials
                       if t.state in (TrialState.COMPLETE, TrialState.FAIL))
        studies.append(RemoteStudyStatus(
            name=name, device=about["device"], driver=about["driver"],
            compute_units=about["compute_units"], family=about["family"],
            problem=ProblemSpec.from_dict(about["problem"]),
            done=sum(s in (TrialState.COMPLETE, TrialState.FAIL) for s in states),
            running=states.count(TrialState.RUNNING),
            budget=study.user_attrs.get(BUDGET_ATTR, len(trials)),
            closed=study.user_attrs.get(CLOSED_ATTR),
            best_median_s=min(values) if values else None))
    now = time.time()
    reported = sorted((w for key, w in attrs.items() if key.startswith(WORKER_ATTR.format(
        owner=""))), key=lambda w: w["started_at"])
    workers = tuple(
        CampaignWorkerStatus(
            owner=w["owner"], host=w["host"], pid=w["pid"], device=w["device"],
            driver=w["driver"], compute_units=w["compute_units"],
            started_at=_when(w["started_at"]), finished_at=_when(w["finished_at"]),
            last_heartbeat=_when(w["seen_at"]),
            alive=w["finished_at"] is None and now - w["seen_at"] < w["stale_after_s"],
            trials_done=told_by[w["owner"]])
        for w in reported)
    return tuple(studies), workers


def counted_by(study: optuna.Study) -> str | None:
    """Who counts this device study's budget ("grpc" or "database"), None when nobody yet."""
    found: Any = study.user_attrs.get(COUNTED_BY_ATTR)
    return found if isinstance(found, str) else None


def mixing_error(campaign_id: int, name: str, counted: str) -> str:
    """The one-line refusal of a worker joining a study the other kind of worker counts."""
    other = "--grpc HOST:PORT --api URL" if counted == "grpc" else "--db URL"
    return (f"campaign {campaign_id}: study {name!r} is counted by {counted} workers; a campaign "
            f"runs a device's studies with one kind of worker (budgets are counted differently); "
            f"accepted: `xe2tune worker --campaign {campaign_id} {other}` for this device")
