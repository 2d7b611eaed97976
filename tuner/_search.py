"""A search over several problems: one study each, sharing the device, store and runner."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xe2tune.db import SqlCoordination, SqlResultStore
from xe2tune.errors import InvalidProblem
from xe2tune.harness import DeviceListing, problem_unfit_reason
from xe2tune.kernels import ProblemSpec, family_source_hash, search_family
from xe2tune.tuner._budget import ConfirmSettings, TuneBudget
from xe2tune.tuner._lease import SearchLease
from xe2tune.tuner._progress import Observer, StudyProgress
from xe2tune.tuner._study import StudyIds, StudyRun
from xe2tune.tuner._trial_runner import TrialRunner


@dataclass(frozen=True)
class SearchPlan:
    """What to tune and how hard; ``confirm`` is the confirmation round ending each study."""

    problems: Sequence[ProblemSpec]
    sampler: str
    budget: TuneBudget
    seed: int | None = None
    confirm: ConfirmSettings = field(default_factory=ConfirmSettings)


def _skipped(problem: ProblemSpec, reason: str, budget: TuneBudget) -> StudyProgress:
    return StudyProgress(problem=problem, space_size=0, cartesian_size=0, trial_index=0,
                         trials_budget=budget.trials, phase="skipped", skipped=reason)


def run_search(
    plan: SearchPlan,
    *,
    store: SqlResultStore,
    runner: TrialRunner,
    listing: DeviceListing,
    device_id: int,
    observe: Observer,
    should_stop: Callable[[], bool],
) -> list[StudyProgress]:
    """Tune every problem of the plan in turn until budgets, the deadline or a stop request.

    A problem that cannot be measured here at all (no family serves it, its reference or its
    buffers do not fit) is skipped before any trial with its reason (``StudyProgress.skipped``,
    phase "skipped"); the search goes on with the next.

    Args:
        plan: the problems, the sampler, the budget per study, the seed and the confirmation
            round ending each study.
        store: the results database; it also holds the leases and reservations that let
            several searches share a study.
        runner: builds and measures each trial (normally in the device process).
        listing: the device measured on, as its studies are named.
        device_id: that device's row in ``store`` (its ceilings, for the roofline fraction).
        observe: called with a ``StudyProgress`` at every step (for progress output).
        should_stop: polled between steps; True ends the search after the trial in flight,
            which is abandoned and stays untried.

    Returns:
        One ``StudyProgress`` per problem, in the plan's order.

    Raises:
        EmptySpaceError: a problem without a single valid config on this device.
        DeviceProcessError: the runner failed.
        StoreError: the database failed.
    """
    deadline = (time.perf_counter() + plan.budget.timeout_s) if plan.budget.timeout_s else None
    finished: list[StudyProgress] = []
    with SearchLease(SqlCoordination(store)) as lease:
        for problem in plan.problems:
            if should_stop() or (deadline is not None and time.perf_counter() >= deadline):
                break
            reason = problem_unfit_reason(problem, listing.caps)
            try:
                family = search_family(problem, listing.caps)
            except InvalidProblem as exc:
                reason = str(exc)
            if reason is not None:
                finished.append(_skipped(problem, reason, plan.budget))
                observe(finished[-1])
                continue
            source = family_source_hash(family)
            ids = StudyIds(
                device_id=device_id, device_name=listing.caps.name,
                kernel_source_id=store.upsert_kernel_source(family.name, source),
                source_hash=source, driver=listing.driver_version,
                compute_units=listing.caps.compute_units,
            )
            study = StudyRun(
                store=store, runner=runner, family=family, problem=problem,
                caps=listing.caps, ids=ids, sampler=plan.sampler, seed=plan.seed, lease=lease,
            )
            finished.append(study.run(plan.budget, deadline, observe, should_stop,
                                      plan.confirm))
    return finished
