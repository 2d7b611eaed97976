"""One problem's study: its space, warm start and trials under a budget, then confirmed.

Several searches may run the same study at once (same database); the trials are asked, held,
told and given back through the SQL coordinator (``_sql_coordinator.py``, whose rules are the
``TrialCoordinator`` contract's) by the one study loop (``_study_loop.py``). In a campaign the
coordinator also counts the study's shared budget in slots, judges its patience on the whole
study and hands the confirmation round to one worker once every slot is done.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import optuna

from xe2tune.db import (
    BestQuery,
    ConfirmationEntry,
    ConfirmationRecord,
    ResultStore,
    TrialRow,
    open_optuna_storage,
)
from xe2tune.errors import InvalidConfig, TrialAbandoned
from xe2tune.harness import MeasureRequest, TrialResult
from xe2tune.kernels import DeviceCaps, GridConfigs, KernelFamily, LauncherConfig, ProblemSpec
from xe2tune.tuner._budget import ConfirmSettings, TuneBudget
from xe2tune.tuner._confirm import confirm
from xe2tune.tuner._coordinator import AskedTrial
from xe2tune.tuner._lease import SearchLease
from xe2tune.tuner._progress import Observer, Outcome, StudyProgress
from xe2tune.tuner._samplers import make_sampler
from xe2tune.tuner._space import FiniteSpace
from xe2tune.tuner._sql_coordinator import SqlTrialCoordinator
from xe2tune.tuner._study_loop import TrialLoop
from xe2tune.tuner._trial_runner import TrialRunner

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class StudyIds:
    """The store's ids a study hangs off."""

    device_id: int
    device_name: str
    kernel_source_id: int
    source_hash: str
    driver: str  # with the name and compute units, the device's identity: identical devices
    compute_units: int  # share a study, two parts differing in any of them never do


def build_space(family: KernelFamily, problem: ProblemSpec, caps: DeviceCaps) -> FiniteSpace:
    """The family's valid configs for this problem and device, as a FiniteSpace.

    Raises:
        EmptySpaceError: no valid config.
    """
    return valid_space(family, problem, caps)[0]


def valid_space(family: KernelFamily, problem: ProblemSpec,
                caps: DeviceCaps) -> tuple[FiniteSpace, Sequence[LauncherConfig]]:
    """The FiniteSpace of the family's valid configs and the configs themselves, index for
    index (in ``valid_configs`` order): a trial's params map to its config by ``space.index``.
    Each config is made when first asked for: a study measures a few hundred of 100,000.

    Raises:
        EmptySpaceError: no valid config.
    """
    grid = family.valid_grid(problem, caps)
    space = FiniteSpace.from_ordinals(grid.space, grid.ordinals)
    return space, GridConfigs(grid, functools.partial(family.config_from_params, problem))


def study_name(ids: StudyIds, family: KernelFamily, problem: ProblemSpec) -> str:
    """One optuna study per (device identity, family + source hash, problem)."""
    return (f"xe2tune|{ids.device_name}|{ids.driver}|{ids.compute_units}cu|"
            f"{family.name}@{ids.source_hash}|{problem.key()}")


def study_name_for_space(storage: optuna.storages.BaseStorage, name: str,
                         space: FiniteSpace) -> str:
    """``name``, unless the optuna study of that name holds a trial sampled over other values
    of a parameter than ``space`` has: then ``name`` with the space's tag before the problem
    key, a study of its own.

    A family's space can change without its kernel sources (a knob value added in Python), and
    optuna refuses another set of categorical choices for a parameter its study already has
    trials of ("dynamic value space"). The store's study record keeps its stored trials, so the
    configs both spaces hold are read back, not measured again. Every opener of the same
    storage state derives the same name: the old study never becomes compatible.
    """
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return name
    distributions = space.distributions()
    if all(distributions.get(param) == distribution
           for trial in storage.get_all_trials(study_id, deepcopy=False)
           for param, distribution in trial.distributions.items()):
        return name
    values = json.dumps([[n, list(v)] for n, v in space.values.items()])
    tag = hashlib.sha256(values.encode()).hexdigest()[:8]
    head, key = name.rsplit("|", 1)
    return f"{head}~space-{tag}|{key}"


class StudyRun:
    """Runs one study to its budget under a lease; safe to stop at any time.

    It is the study loop's recorder too: a trial's measurement goes to the results store, and
    a config another search stored already is read back instead of measured.
    """

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
        lease: SearchLease,
        claim: Callable[[optuna.Study], None] | None = None,
    ) -> None:
        """Opens the study (creating it on first use) and enqueues its warm start.

        ``claim`` is called with the optuna study as soon as it is open, before anything is
        enqueued into it; an exception it raises refuses the study unchanged.
        """
        self.store, self.runner, self.family, self.problem, self.caps = (
            store, runner, family, problem, caps)
        started = time.perf_counter()
        self.space, self.configs = valid_space(family, problem, caps)
        self.default = family.default_config(problem, caps)
        self.baselines = {b.config.config_hash(): b for b in family.baselines(problem, caps)
                          if family.invalid_reason(b.config, problem, caps) is None}
        self.enumerate_s = time.perf_counter() - started
        problem_id = store.upsert_problem(problem)
        name = study_name(ids, family, problem)
        self.record = store.get_or_create_study(
            device_id=ids.device_id, kernel_source_id=ids.kernel_source_id,
            problem_id=problem_id, sampler=sampler, optuna_study_name=name,
        )
        storage = open_optuna_storage(store)
        # The stored name wins: a study keeps its optuna study whoever created it first, as
        # long as that study was sampled over this space.
        name = study_name_for_space(storage, self.record.optuna_study_name or name, self.space)
        if name != self.record.optuna_study_name:
            self.record = store.move_to_optuna_study(self.record.id, name)
        self.study = optuna.create_study(
            study_name=name, storage=storage, direction="minimize", load_if_exists=True,
            sampler=make_sampler(sampler, self.space, seed),
        )
        if claim is not None:
            claim(self.study)
        self.ids = ids
        self.coordinator = SqlTrialCoordinator(
            study=self.study, storage=storage, lease=lease, study_id=self.record.id,
            space=self.space, config_of=self._config, config_hash=self._config_hash)
        self._enqueue_warm_start()
        self.setup_s = time.perf_counter() - started - self.enumerate_s

    # -- warm start -------------------------------------------------------------------------

    def _enqueue_warm_start(self) -> None:
        # The seeded baselines first (a tuned result is always shown against them), then the
        # default (so the result is never worse than it), then the best configs of neighbouring
        # problems already tuned on this device (so later studies start warm).
        starts = [(f"baseline {b.label!r}", b.config) for b in self.baselines.values()]
        starts += [("default", self.default)]
        starts += [("neighbouring problem's best", c) for c in self._neighbour_bests()]
        for origin, config in starts:
            params = self._params_in_space(origin, config)
            if params is not None:
                self.study.enqueue_trial(params, skip_if_exists=True)

    def _params_in_space(self, origin: str, config: LauncherConfig) -> dict | None:
        """The config's params when it is a valid point of this study's space, else None.

        Stored and posted configs may be invalid here or lie outside the grid (a tile of 4096
        sent to the API): optuna would reject them at ``ask``, failing every study that starts
        from them. They are skipped with a one-line warning naming why.
        """
        reason = self.family.invalid_reason(config, self.problem, self.caps)
        if reason is None:
            try:
                params = self.family.params_from_config(config)
            except InvalidConfig as exc:
                reason = str(exc)
            else:
                if self.space.index(params) is not None:
                    return params
                values = self.space.values
                outside = [f"{k}={v!r}" for k, v in params.items()
                           if v not in values.get(k, ())]
                reason = (f"{', '.join(outside)} not among the space's values" if outside
                          else "not a config of the search space")
        warnings.warn(f"warm start of {self.problem.key()}: skipped the {origin} config "
                      f"{config.config_hash()} ({reason})", stacklevel=2)
        return None

    def _neighbour_bests(self) -> list[LauncherConfig]:
        p = self.problem
        query = BestQuery(head_dim=p.head_dim, head_dim_v=p.head_dim_v, dtype=p.dtype,
                          kv_dtype=p.kv_dtype, seq=p.kv_len, mode=p.mode, causal=p.causal,
                          device=self.ids.device_name)
        found = self.store.best(query)
        if found is None:
            return []
        return [found.config]

    # -- configs of params, and the loop's recorder -----------------------------------------

    def _config(self, params: dict) -> LauncherConfig:
        """The config of a trial's params: one of the space's, made when the space was built.
        Params outside the space (a trial queued by another version of xe2tune) are converted,
        and measured as before."""
        index = self.space.index(params)
        if index is None:
            return self.family.config_from_params(self.problem, params)
        return self.configs[index]

    def _config_hash(self, params: dict) -> str | None:
        index = self.space.index(params)
        return None if index is None else self.configs[index].config_hash()

    def _request(self, config: LauncherConfig) -> MeasureRequest:
        return MeasureRequest(self.family, self.problem, config)

    def stored_outcome(self, asked: AskedTrial) -> Outcome | None:
        """The config's stored trial (another search measured it), else None."""
        row = self.store.find_trial(self.record.id, asked.digest)
        return None if row is None else Outcome.from_row(row)

    def save(self, asked: AskedTrial, result: TrialResult) -> None:
        """Store the trial's measurement, flagged as the default or a baseline."""
        baseline = self.baselines.get(asked.digest)
        self.store.record_trial(self.record.id, result, number=asked.trial.number,
                                is_default=asked.config == self.default,
                                baseline=baseline.label if baseline else None)

    # -- the run ----------------------------------------------------------------------------

    def run(self, budget: TuneBudget, deadline: float | None, observe: Observer,
            should_stop: Callable[[], bool], confirm_with: ConfirmSettings) -> StudyProgress:
        """Run up to ``budget.trials`` trials, then confirm the best; the final progress.

        A stop request (``should_stop``, or the runner's ``abandon``) ends the study without a
        confirmation round; the trial in flight and those asked ahead go back to the queue.

        Raises:
            DeviceProcessError: the runner failed.
            StoreError: the database failed.
        """
        progress = StudyProgress(
            problem=self.problem, space_size=len(self.space),
            cartesian_size=self.space.cartesian_size, trial_index=0,
            trials_budget=budget.trials, enumerate_s=self.enumerate_s, setup_s=self.setup_s,
        )
        rows = self.store.trials(self.record.id)
        progress.stored = len(rows)
        for row in rows:
            progress.count(Outcome.from_row(row), self.default)
        progress.failed = 0
        progress.requeued = self.coordinator.recover()
        observe(progress)
        trials = max(0, budget.trials - len(rows)) if budget.top_up else budget.trials
        confirmed = self._current_confirmation(rows) if trials == 0 else None
        loop = TrialLoop(self.coordinator, self, self.runner, self._request, self.default)
        try:
            if confirmed is not None:
                # A finished study asked again: its stored round answers, nothing is re-timed.
                self._absorb_confirmation(progress, confirmed, rows)
            elif trials > 0:
                loop.run(progress, trials, patience=budget.patience, deadline=deadline,
                         observe=observe, should_stop=should_stop)
            if (confirmed is None and not should_stop()
                    and self.coordinator.claim_confirmation()):
                progress.phase = "confirming"
                observe(progress)
                confirming = time.perf_counter()
                self._confirm(progress, confirm_with)
                progress.confirm_s = time.perf_counter() - confirming
                self.coordinator.settle_confirmation()
        except TrialAbandoned:
            progress.phase = "stopped"
        progress.phase = "done"
        observe(progress)
        return progress

    def _confirm(self, progress: StudyProgress, settings: ConfirmSettings) -> None:
        record = confirm(
            self.store, self.runner, self._request(self.default),
            study_id=self.record.id, caps=self.caps, settings=settings,
            baselines={h: b.label for h, b in self.baselines.items()})
        if record is not None:
            self._absorb_confirmation(progress, record, self.store.trials(self.record.id))

    def _current_confirmation(self, rows: list[TrialRow]) -> ConfirmationRecord | None:
        """The study's newest confirmation round, if no trial was stored after it."""
        record = self.store.confirmation(self.record.id)
        if record is None or record.created_at is None:
            return None
        if any(row.created_at > record.created_at for row in rows):
            return None
        return record

    def _absorb_confirmation(self, progress: StudyProgress, record: ConfirmationRecord,
                             rows: list[TrialRow]) -> None:
        """The round's best and default as the study's (times of one round, never of two runs);
        ``rows``: the study's stored trials, the round's among them."""
        progress.confirmation = record
        by_id = {row.id: row for row in rows}

        def retimed(entry: ConfirmationEntry, median_s: float) -> Outcome:
            return Outcome.from_row(by_id[entry.trial_id]).timed_at(median_s)

        best = record.best
        assert best.median_s is not None, "the best of a round ran OK"
        progress.best = retimed(best, best.median_s)
        default = record.default
        progress.default = (None if default is None or default.median_s is None else
                            retimed(default, default.median_s))
