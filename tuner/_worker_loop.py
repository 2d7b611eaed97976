"""A campaign worker: take the next trial of a study of this device until the budgets are spent.

The worker holds a lease for its whole life and records itself in the campaign. It goes over
the campaign's problems in order; for each it opens this device's study (created by the first
worker on an identical device, joined by the others) and runs trials while it can claim budget
slots. When nothing is left to claim it waits: a slot another worker holds may come back (that
worker stopped or died), and it exits once every study of its device is finished, or keeps
polling with ``follow``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import optuna

from xe2tune.db import (
    COUNTED_BY_ATTR,
    CampaignRecord,
    CampaignStore,
    ResultStore,
    SqlCoordination,
    SqlResultStore,
    counted_by,
    mixing_error,
)
from xe2tune.errors import InvalidProblem, StoreError
from xe2tune.harness import DeviceListing, problem_unfit_reason
from xe2tune.kernels import ProblemSpec, family_source_hash, search_family
from xe2tune.tuner._budget import ConfirmSettings, TuneBudget
from xe2tune.tuner._campaign import SlotGate
from xe2tune.tuner._lease import SearchLease
from xe2tune.tuner._progress import Observer, StudyProgress
from xe2tune.tuner._study import StudyIds, StudyRun
from xe2tune.tuner._trial_runner import TrialRunner

POLL_S = 2.0  # how often a worker with nothing to claim looks again


@dataclass
class WorkerTally:
    """What this worker did, per problem: trials measured, reused from the store, failed."""

    owner: str = ""
    measured: dict[ProblemSpec, int] = field(default_factory=dict)
    reused: dict[ProblemSpec, int] = field(default_factory=dict)
    failed: dict[ProblemSpec, int] = field(default_factory=dict)
    confirmed: list[ProblemSpec] = field(default_factory=list)
    skipped: dict[ProblemSpec, str] = field(default_factory=dict)

    def add(self, progress: StudyProgress) -> None:
        p = progress.problem
        for counts, value in ((self.measured, progress.measured), (self.reused, progress.reused),
                              (self.failed, progress.failed)):
            counts[p] = counts.get(p, 0) + value
        if progress.confirmation is not None:
            self.confirmed.append(p)


def run_worker(
    campaign: CampaignRecord,
    *,
    store: SqlResultStore,
    campaigns: CampaignStore,
    runner: TrialRunner,
    listing: DeviceListing,
    device_id: int,
    observe: Observer,
    should_stop: Callable[[], bool],
    follow: bool = False,
    seed: int | None = None,
) -> WorkerTally:
    """Work on the campaign until its studies on this device are finished (or a stop).

    Args:
        campaign: the campaign, as ``CampaignStore.get`` returns it.
        store: the results database the campaign lives in.
        campaigns: the campaigns of ``store`` (its studies, its progress).
        runner: builds and measures each trial (normally in the device process).
        listing: this device; identical devices (name, driver, compute units) share studies.
        device_id: that device's row in ``store``.
        observe: called with a ``StudyProgress`` at every step.
        should_stop: polled between steps; True returns the trial in flight to the pool.
        follow: keep polling for work once every budget is spent, until ``should_stop``.
        seed: the sampler's seed (None: random).

    Returns:
        What this worker did per problem (measured, reused, failed, confirmed, skipped).

    Raises:
        EmptySpaceError: a problem without a single valid config on this device.
        DeviceProcessError: the runner failed.
        StoreError: the database failed.
    """
    tally = WorkerTally()
    budget = TuneBudget(trials=campaign.trials)  # patience is judged study-wide, by the gate
    confirm_with = ConfirmSettings(rounds=campaign.confirm_rounds)
    coordination = SqlCoordination(store)
    with SearchLease(coordination) as lease:
        tally.owner = lease.owner
        coordination.join(campaign.id, owner=lease.owner, device_id=device_id, host=lease.host,
                       pid=lease.pid)
        try:
            runs: dict[ProblemSpec, StudyRun] = {}
            while not should_stop():
                for problem in campaign.problems:
                    if should_stop():
                        break
                    if problem in tally.skipped:
                        continue
                    run = runs.get(problem)
                    if run is None:
                        reason = unfit_reason(problem, listing)
                        if reason is not None:
                            tally.skipped[problem] = reason
                            continue
                        run = runs[problem] = _open_study(
                            campaign, problem, store=store, campaigns=campaigns, runner=runner,
                            listing=listing, device_id=device_id, lease=lease, seed=seed)
                    tally.add(run.run(budget, None, observe, should_stop, confirm_with))
                if not follow and _finished(campaigns, campaign, runs):
                    break
                _sleep(POLL_S, should_stop)
        finally:
            coordination.leave(lease.owner)
    return tally


def unfit_reason(problem: ProblemSpec, listing: DeviceListing) -> str | None:
    """Why the problem cannot be tuned on this device at all (no family serves it, it does not
    fit), None when it can."""
    reason = problem_unfit_reason(problem, listing.caps)
    if reason is None:
        try:
            search_family(problem, listing.caps)
        except InvalidProblem as exc:
            reason = str(exc)
    return reason


def _open_study(campaign: CampaignRecord, problem: ProblemSpec, *, store: ResultStore,
                campaigns: CampaignStore, runner: TrialRunner, listing: DeviceListing,
                device_id: int, lease: SearchLease, seed: int | None) -> StudyRun:
    """This device's study of the problem, linked to the campaign (by the first worker).

    Raises:
        StoreError: gRPC workers count this study's budget (a campaign mixing both kinds on one
            device would spend each budget twice).
    """
    family = search_family(problem, listing.caps)
    source = family_source_hash(family)
    ids = StudyIds(device_id=device_id, device_name=listing.caps.name,
                   kernel_source_id=store.upsert_kernel_source(family.name, source),
                   source_hash=source, driver=listing.driver_version,
                   compute_units=listing.caps.compute_units)
    run = StudyRun(store=store, runner=runner, family=family, problem=problem,
                   caps=listing.caps, ids=ids, sampler=campaign.sampler, seed=seed,
                   lease=lease, claim=functools.partial(_claim_for_database, campaign))
    # The budget's slots hang off the study's id, which the run finds or creates as it opens.
    run.coordinator.count_budget(SlotGate(
        lease.coordination, campaign, campaigns.link_study(campaign.id, run.record.id),
        lease.owner))
    return run


def _claim_for_database(campaign: CampaignRecord, study: optuna.Study) -> None:
    """Mark the study's budget as counted by database workers, unless gRPC workers count it:
    then refuse it before the run enqueues its warm start into their budget."""
    counted = counted_by(study)
    if counted == "grpc":
        raise StoreError(mixing_error(campaign.id, study.study_name, "grpc"))
    if counted is None:
        study.set_user_attr(COUNTED_BY_ATTR, "database")


def _finished(campaigns: CampaignStore, campaign: CampaignRecord,
              runs: dict[ProblemSpec, StudyRun]) -> bool:
    """Every study this worker runs is finished (budget or early close, and confirmed)."""
    mine = {run.record.id for run in runs.values()}
    status = campaigns.status(campaign.id, remote=False)  # its studies are database ones
    return all(s.finished for s in status.studies if s.study.id in mine)


def _sleep(seconds: float, should_stop: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not should_stop():
        time.sleep(0.1)
