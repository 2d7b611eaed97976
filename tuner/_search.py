"""A search over several problems: one study each, sharing the device, store and runner."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xe2tune.db import ResultStore
from xe2tune.harness import DeviceListing
from xe2tune.kernels import ProblemSpec, family_for_mode, source_hash
from xe2tune.tuner._budget import TuneBudget
from xe2tune.tuner._study import Observer, StudyIds, StudyProgress, StudyRun
from xe2tune.tuner._trial_runner import TrialRunner


@dataclass(frozen=True)
class SearchPlan:
    """What to tune and how hard."""

    problems: Sequence[ProblemSpec]
    sampler: str
    budget: TuneBudget
    seed: int | None = None


def run_search(
    plan: SearchPlan,
    *,
    store: ResultStore,
    runner: TrialRunner,
    listing: DeviceListing,
    device_id: int,
    observe: Observer,
    should_stop: Callable[[], bool],
) -> list[StudyProgress]:
    """Tune every problem of the plan in turn until budgets, the deadline or a stop request.

    Raises:
        EmptySpaceError: a problem without a single valid config on this device.
        StoreError: the database failed.
    """
    deadline = (time.perf_counter() + plan.budget.timeout_s) if plan.budget.timeout_s else None
    finished: list[StudyProgress] = []
    for problem in plan.problems:
        if should_stop() or (deadline is not None and time.perf_counter() >= deadline):
            break
        family = family_for_mode(problem.mode)
        source = source_hash(family.source_file)
        ids = StudyIds(
            device_id=device_id, device_name=listing.caps.name,
            kernel_source_id=store.upsert_kernel_source(family.name, source),
            source_hash=source,
        )
        study = StudyRun(
            store=store, runner=runner, family=family, problem=problem, caps=listing.caps,
            ids=ids, sampler=plan.sampler, seed=plan.seed,
        )
        finished.append(study.run(plan.budget, deadline, observe, should_stop))
    return finished
