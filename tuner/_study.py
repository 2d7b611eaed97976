"""One problem's study: ask -> build config -> measure -> store -> tell, under a budget."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import optuna
from optuna.trial import TrialState

from xe2tune.db import BestQuery, ResultStore, TrialRow
from xe2tune.harness import TrialResult, TrialStatus
from xe2tune.harness._runner import MeasureRequest
from xe2tune.kernels import DeviceCaps, KernelFamily, LauncherConfig, ProblemSpec
from xe2tune.tuner._budget import TuneBudget
from xe2tune.tuner._samplers import make_sampler
from xe2tune.tuner._space import FiniteSpace
from xe2tune.tuner._trial_runner import TrialRunner

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class StudyIds:
    """The store's ids a study hangs off."""

    device_id: int
    device_name: str
    kernel_source_id: int
    source_hash: str


@dataclass
class StudyProgress:
    """What the observer sees after every trial."""

    problem: ProblemSpec
    space_size: int
    cartesian_size: int
    trial_index: int  # trials started in this run, 1-based
    trials_budget: int
    config: dict | None = None
    phase: str = "starting"
    best: Outcome | None = None
    default: Outcome | None = None
    reused: int = 0
    measured: int = 0
    failed: int = 0
    build_s: float = 0.0
    verify_s: float = 0.0
    bench_s: float = 0.0
    started: float = field(default_factory=time.perf_counter)


Observer = Callable[[StudyProgress], None]


@dataclass(frozen=True)
class Outcome:
    """What the loop needs of a trial, whether measured now or read back from the store."""

    status: TrialStatus
    config: dict
    config_hash: str
    median_s: float | None
    tflops: float | None
    roofline_fraction: float | None
    error: str | None
    build_s: float = 0.0
    verify_s: float = 0.0
    bench_s: float = 0.0

    @property
    def objective(self) -> float:
        ok = self.status is TrialStatus.OK and self.median_s is not None
        return self.median_s if ok else math.inf

    @classmethod
    def from_result(cls, r: TrialResult) -> Outcome:
        return cls(
            status=r.status, config=r.config, config_hash=r.config_hash,
            median_s=r.timing.median if r.timing else None,
            tflops=r.roofline.tflops if r.roofline else None,
            roofline_fraction=r.roofline.roofline_fraction if r.roofline else None,
            error=r.error, build_s=r.build_s, verify_s=r.verify_s, bench_s=r.bench_s,
        )

    @classmethod
    def from_row(cls, row: TrialRow) -> Outcome:
        m = row.measurement
        return cls(
            status=row.status, config=row.config, config_hash=row.config_hash,
            median_s=m.median_s if m else None,
            tflops=m.achieved_flops / 1e12 if m and m.achieved_flops else None,
            roofline_fraction=m.roofline_fraction if m else None, error=row.error,
        )


def build_space(family: KernelFamily, problem: ProblemSpec, caps: DeviceCaps) -> FiniteSpace:
    """The family's valid configs for this problem and device, as a FiniteSpace.

    Raises:
        EmptySpaceError: no valid config.
    """
    params = family.parameter_space(problem)
    valid = [family.params_from_config(c) for c in family.valid_configs(problem, caps)]
    return FiniteSpace.from_params(params, valid)


def study_name(ids: StudyIds, family: KernelFamily, problem: ProblemSpec) -> str:
    """One optuna study per (device, family + source hash, problem)."""
    return f"xe2tune|{ids.device_name}|{family.name}@{ids.source_hash}|{problem.key()}"


class StudyRun:
    """Runs one study to its budget; safe to stop between trials (``stop`` flag)."""

    def __init__(
        self,
        *,
        store: ResultStore,
        runner: TrialRunner,
        family: KernelFamily,
        problem: ProblemSpec,
        caps: DeviceCaps,
        ids: StudyIds,
        sampler: str,
        seed: int | None,
    ) -> None:
        self.store, self.runner, self.family, self.problem, self.caps = (
            store, runner, family, problem, caps)
        self.space = build_space(family, problem, caps)
        self.default = family.default_config(problem, caps)
        problem_id = store.upsert_problem(problem)
        name = study_name(ids, family, problem)
        self.record = store.get_or_create_study(
            device_id=ids.device_id, kernel_source_id=ids.kernel_source_id,
            problem_id=problem_id, sampler=sampler, optuna_study_name=name,
        )
        storage = optuna.storages.RDBStorage(
            store.optuna_storage_url(), engine_kwargs=store.optuna_engine_kwargs()
        )
        self.study = optuna.create_study(
            study_name=name, storage=storage, direction="minimize", load_if_exists=True,
            sampler=make_sampler(sampler, self.space, seed),
        )
        self.ids = ids
        self._enqueue_warm_start()

    def _enqueue_warm_start(self) -> None:
        # The default first (so the result is never worse than it), then the best configs of
        # neighbouring problems already tuned on this device (so later studies start warm).
        starts = [self.default, *self._neighbour_bests()]
        for config in starts:
            if self.family.invalid_reason(config, self.problem, self.caps) is None:
                self.study.enqueue_trial(self.family.params_from_config(config),
                                         skip_if_exists=True)

    def _neighbour_bests(self) -> list[LauncherConfig]:
        p = self.problem
        query = BestQuery(head_dim=p.head_dim, dtype=p.dtype, seq=p.kv_len, mode=p.mode,
                          causal=p.causal, device=self.ids.device_name)
        found = self.store.best(query)
        if found is None:
            return []
        try:
            return [LauncherConfig.from_dict(found.config)]
        except ValueError:
            return []

    def _already_measured(self) -> int:
        return sum(1 for t in self.study.get_trials(deepcopy=False)
                   if t.state in (TrialState.COMPLETE, TrialState.FAIL))

    def _ask(self) -> tuple[optuna.trial.Trial, LauncherConfig] | None:
        if self._already_measured() + self._open_trials() >= len(self.space):
            return None
        trial = self.study.ask(self.space.distributions())
        return trial, self.family.config_from_params(self.problem, trial.params)

    def _open_trials(self) -> int:
        return sum(1 for t in self.study.get_trials(deepcopy=False)
                   if t.state is TrialState.RUNNING)

    def _outcome_for(self, config: LauncherConfig, number: int,
                     progress: StudyProgress) -> Outcome:
        stored = self.store.find_trial(self.record.id, config.config_hash())
        if stored is not None:
            progress.reused += 1
            return Outcome.from_row(stored)
        result = self.runner.measure(MeasureRequest(self.family, self.problem, config))
        self.store.record_trial(self.record.id, result, number=number,
                                is_default=config == self.default)
        progress.measured += 1
        return Outcome.from_result(result)

    def run(self, budget: TuneBudget, deadline: float | None, observe: Observer,
            should_stop: Callable[[], bool]) -> StudyProgress:
        """Run up to ``budget.trials`` trials; returns the final progress record."""
        progress = StudyProgress(
            problem=self.problem, space_size=len(self.space),
            cartesian_size=self.space.cartesian_size, trial_index=0,
            trials_budget=budget.trials,
        )
        self._absorb_stored_best(progress)
        observe(progress)
        since_best = 0
        current = self._ask()
        while current is not None and progress.trial_index < budget.trials:
            trial, config = current
            progress.trial_index += 1
            progress.config, progress.phase = config.to_dict(), "measuring"
            observe(progress)
            more = progress.trial_index < budget.trials and not should_stop()
            upcoming = self._ask() if more else None
            if upcoming is not None:
                self.runner.prebuild(MeasureRequest(self.family, self.problem, upcoming[1]))
            result = self._outcome_for(config, trial.number, progress)
            self._tell(trial, result)
            progress.build_s += result.build_s
            progress.verify_s += result.verify_s
            progress.bench_s += result.bench_s
            improved = self._update_best(progress, result, config)
            since_best = 0 if improved else since_best + 1
            progress.phase = "measured"
            observe(progress)
            out_of_time = deadline is not None and time.perf_counter() >= deadline
            patience_out = budget.patience is not None and since_best >= budget.patience
            if should_stop() or out_of_time or patience_out:
                if upcoming is not None:
                    # Asked but never measured: fail it in optuna so the study stays
                    # consistent; nothing about it is written to the results store.
                    self.study.tell(upcoming[0], state=TrialState.FAIL)
                break
            current = upcoming
        progress.phase = "done"
        observe(progress)
        return progress

    def _tell(self, trial: optuna.trial.Trial, result: Outcome) -> None:
        trial.set_user_attr("config_hash", result.config_hash)
        trial.set_user_attr("status", result.status.value)
        if result.status is TrialStatus.OK and math.isfinite(result.objective):
            self.study.tell(trial, result.objective)
        else:
            trial.set_user_attr("error", (result.error or "")[:500])
            self.study.tell(trial, state=TrialState.FAIL)

    def _update_best(self, progress: StudyProgress, result: Outcome,
                     config: LauncherConfig) -> bool:
        if config == self.default and result.status is TrialStatus.OK:
            progress.default = result
        if result.status is not TrialStatus.OK:
            progress.failed += 1
            return False
        if progress.best is None or result.objective < progress.best.objective:
            progress.best = result
            return True
        return False

    def _absorb_stored_best(self, progress: StudyProgress) -> None:
        for row in self.store.trials(self.record.id):
            self._update_best(progress, Outcome.from_row(row),
                              LauncherConfig.from_dict(row.config))
        progress.failed = 0

