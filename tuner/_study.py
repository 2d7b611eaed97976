"""One problem's study: ask -> reserve -> measure -> store -> tell, under a budget, then confirm.

Several searches may run the same study at once (same database): each config is reserved
before it is measured, so none is measured twice. A stop, a signal or a crash never turns an
asked config into a failed one: untold trials go back to the queue, and trials left RUNNING by a
killed search are requeued by the next one (see ``_trials.py`` and ``_lease.py``).

In a campaign (``gate`` given) the study is shared by many workers: each trial first claims a
slot of the study's budget, the budget's patience is judged on the whole study, and one worker
runs the confirmation round once every slot is done (see ``_campaign.py``).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import optuna
from optuna.trial import TrialState

from xe2tune.db import (
    BestQuery,
    ConfirmationEntry,
    ConfirmationRecord,
    ResultStore,
    TrialRow,
)
from xe2tune.errors import InvalidConfig, TrialAbandoned
from xe2tune.harness import MeasureRequest, TrialResult, TrialStatus
from xe2tune.kernels import DeviceCaps, GridConfigs, KernelFamily, LauncherConfig, ProblemSpec
from xe2tune.tuner._budget import TuneBudget
from xe2tune.tuner._campaign import PATIENCE_CLOSED, SPACE_CLOSED, SlotGate, patience_spent
from xe2tune.tuner._confirm import ConfirmSettings, confirm
from xe2tune.tuner._finite_sampler import SpaceExhaustedError
from xe2tune.tuner._lease import SearchLease
from xe2tune.tuner._samplers import make_sampler
from xe2tune.tuner._space import FiniteSpace
from xe2tune.tuner._trial_runner import TrialRunner
from xe2tune.tuner._trials import TrialBook

optuna.logging.set_verbosity(optuna.logging.WARNING)

POLL_S = 0.5  # how often a search waiting on a config another search measures looks again


@dataclass(frozen=True)
class StudyIds:
    """The store's ids a study hangs off."""

    device_id: int
    device_name: str
    kernel_source_id: int
    source_hash: str
    driver: str  # with the name and compute units, the device's identity: identical devices
    compute_units: int  # share a study, two parts differing in any of them never do


@dataclass
class StudyProgress:
    """What the observer sees after every trial."""

    problem: ProblemSpec
    space_size: int
    cartesian_size: int
    trial_index: int  # trials started in this run, 1-based
    trials_budget: int
    config: LauncherConfig | None = None  # the trial being measured
    phase: str = "starting"
    best: Outcome | None = None
    default: Outcome | None = None
    reused: int = 0
    measured: int = 0
    failed: int = 0
    requeued: int = 0  # trials of killed searches put back in the queue at the start
    build_s: float = 0.0
    verify_s: float = 0.0
    bench_s: float = 0.0
    stored: int = 0  # the study's trials stored before this run
    # the rest of the study's wall time, for a run's timeline (benchmarks/first_contact.py)
    enumerate_s: float = 0.0  # the valid space, the default and the baselines
    setup_s: float = 0.0  # the study's rows, its optuna study and its warm start
    store_s: float = 0.0  # each trial's result stored and told to optuna
    confirm_s: float = 0.0  # the confirmation round
    confirmation: ConfirmationRecord | None = None
    skipped: str | None = None  # why the problem was not searched at all
    started: float = field(default_factory=time.perf_counter)


Observer = Callable[[StudyProgress], None]


@dataclass(frozen=True)
class Outcome:
    """What the loop needs of a trial, whether measured now or read back from the store."""

    status: TrialStatus
    config: LauncherConfig
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
            status=r.status, config=r.config,
            median_s=r.timing.median if r.timing else None,
            tflops=r.roofline.tflops if r.roofline else None,
            roofline_fraction=r.roofline.roofline_fraction if r.roofline else None,
            error=r.error, build_s=r.build_s, verify_s=r.verify_s, bench_s=r.bench_s,
        )

    @classmethod
    def from_row(cls, row: TrialRow) -> Outcome:
        """A stored trial."""
        m = row.measurement
        return cls(
            status=row.status, config=row.config,
            median_s=m.median_s if m else None,
            tflops=m.achieved_flops / 1e12 if m and m.achieved_flops else None,
            roofline_fraction=m.roofline_fraction if m else None, error=row.error,
        )

    def timed_at(self, median_s: float) -> Outcome:
        """The same config re-timed at ``median_s``: rates scale with the time."""
        scale = self.median_s / median_s if self.median_s else 1.0
        return replace(
            self, median_s=median_s,
            tflops=None if self.tflops is None else self.tflops * scale,
            roofline_fraction=(None if self.roofline_fraction is None
                               else self.roofline_fraction * scale))


@dataclass
class _Asked:
    """A trial asked and not yet told; ``holder`` is another search measuring its config."""

    trial: optuna.trial.Trial
    config: LauncherConfig
    digest: str  # the config's hash, the key it is reserved, found and stored under
    holder: str | None
    slot: int | None = None  # the campaign budget slot it runs in


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


class StudyRun:
    """Runs one study to its budget under a lease; safe to stop at any time."""

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
        gate: SlotGate | None = None,
    ) -> None:
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
        storage = optuna.storages.RDBStorage(
            store.optuna_storage_url(), engine_kwargs=store.optuna_engine_kwargs()
        )
        # The stored name wins: a study keeps its optuna study whoever created it first.
        name = self.record.optuna_study_name or name
        self.study = optuna.create_study(
            study_name=name, storage=storage, direction="minimize", load_if_exists=True,
            sampler=make_sampler(sampler, self.space, seed),
        )
        self.ids = ids
        self.lease = lease
        self.gate = gate
        self.book = TrialBook(self.study, storage, lease)
        self._asked: dict[int, _Asked] = {}
        self._enqueue_warm_start()
        self.setup_s = time.perf_counter() - started - self.enumerate_s
        self.store_s = 0.0  # record_trial and tell, summed by _outcome_for and _tell

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

    # -- asking, reserving, telling ---------------------------------------------------------

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

    def _claim_slot(self) -> int | None:
        """A campaign slot for the next trial, after requeueing dead workers' trials (so a slot
        a dead worker held re-runs its trial); None when the study's budget is spent or held."""
        assert self.gate is not None
        self.book.recover(self.record.id, self._config_hash)
        if self._campaign_patience_spent():
            return None
        return self.gate.claim_trial()

    def _campaign_patience_spent(self) -> bool:
        """True, and the study closed for every worker, when the campaign's patience is spent
        on the study's told trials (every worker's)."""
        assert self.gate is not None
        if patience_spent(self.study.get_trials(deepcopy=False), self.gate.campaign.patience):
            self.gate.close(PATIENCE_CLOSED)
            return True
        return False

    def _ask(self) -> _Asked | None:
        """Ask the next trial and reserve its config; None when the space is used up (or, in a
        campaign, when no budget slot is free)."""
        slot = None if self.gate is None else self._claim_slot()
        if self.gate is not None and slot is None:
            return None
        trials = self.study.get_trials(deepcopy=False)
        taken = {self.space.index(t.params) for t in trials} - {None}
        waiting = any(t.state is TrialState.WAITING for t in trials)
        trial = None
        if len(taken) < len(self.space) or waiting:
            try:
                trial = self.book.ask(self.space.distributions())
            except SpaceExhaustedError:  # another search took the last configs meanwhile
                pass
        if trial is None:
            if self.gate is not None and slot is not None:
                self.gate.free(slot)
                self.gate.close(SPACE_CLOSED)
            return None
        config = self._config(trial.params)
        digest = config.config_hash()
        holder = self.lease.coordination.reserve_config(
            self.record.id, digest, owner=self.lease.owner, trial_number=trial.number)
        asked = _Asked(trial, config, digest, holder, slot)
        self._asked[trial.number] = asked
        return asked

    def _await_config(self, asked: _Asked, should_stop: Callable[[], bool]) -> None:
        """Return once this search holds the config, or another search has stored it.

        Raises:
            TrialAbandoned: a stop was requested while waiting.
        """
        digest = asked.digest
        while asked.holder is not None:
            if self.store.find_trial(self.record.id, digest) is not None:
                return
            if should_stop():
                raise TrialAbandoned("stopped while another search measured the config")
            time.sleep(POLL_S)
            self.lease.live_owners()  # releases a holder that died, so the config frees up
            asked.holder = self.lease.coordination.reserve_config(
                self.record.id, digest, owner=self.lease.owner, trial_number=asked.trial.number)

    def _outcome_for(self, asked: _Asked, progress: StudyProgress,
                     should_stop: Callable[[], bool]) -> Outcome:
        self._await_config(asked, should_stop)
        config = asked.config
        stored = self.store.find_trial(self.record.id, asked.digest)
        if stored is not None:
            progress.reused += 1
            return Outcome.from_row(stored)
        result = self.runner.measure(MeasureRequest(self.family, self.problem, config))
        baseline = self.baselines.get(asked.digest)
        started = time.perf_counter()
        self.store.record_trial(self.record.id, result, number=asked.trial.number,
                                is_default=config == self.default,
                                baseline=baseline.label if baseline else None)
        self.store_s += time.perf_counter() - started
        progress.measured += 1
        return Outcome.from_result(result)

    def _tell(self, asked: _Asked, result: Outcome) -> None:
        started = time.perf_counter()
        trial = asked.trial
        trial.set_user_attr("config_hash", asked.digest)
        trial.set_user_attr("status", result.status.value)
        ok = result.status is TrialStatus.OK and math.isfinite(result.objective)
        if not ok:
            trial.set_user_attr("error", (result.error or "")[:500])
        self.book.tell(trial, result.objective if ok else None)
        if self.gate is not None and asked.slot is not None:
            self.gate.settle(asked.slot, trial.number)
            asked.slot = None
        self._release(asked)
        self.store_s += time.perf_counter() - started

    def _release(self, asked: _Asked) -> None:
        self._asked.pop(asked.trial.number, None)
        if asked.holder is None:
            self.lease.coordination.release_config(self.record.id, asked.digest,
                                                   owner=self.lease.owner)

    def _requeue_untold(self) -> None:
        """Every asked, untold trial back to the queue: its config stays untried, not failed."""
        for asked in list(self._asked.values()):
            self.book.requeue(asked.trial.number)
            if self.gate is not None and asked.slot is not None:
                self.gate.free(asked.slot)
            self._release(asked)

    # -- the loop ---------------------------------------------------------------------------

    def run(self, budget: TuneBudget, deadline: float | None, observe: Observer,
            should_stop: Callable[[], bool], confirm_with: ConfirmSettings) -> StudyProgress:
        """Run up to ``budget.trials`` trials, then confirm the best; the final progress.

        A stop request (``should_stop``, or the runner's ``abandon``) ends the study without a
        confirmation round; the trial in flight and the one asked next go back to the queue.

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
        self._absorb_stored_best(progress, rows)
        progress.requeued = self.book.recover(self.record.id, self._config_hash)
        observe(progress)
        trials = max(0, budget.trials - len(rows)) if budget.top_up else budget.trials
        confirmed = self._current_confirmation(rows) if trials == 0 else None
        try:
            if confirmed is not None:
                # A finished study asked again: its stored round answers, nothing is re-timed.
                self._absorb_confirmation(progress, confirmed, rows)
            elif trials > 0:
                self._loop(progress, trials, budget, deadline, observe, should_stop)
            self._requeue_untold()
            if confirmed is None and not should_stop() and (
                    self.gate is None or self.gate.claim_confirmation()):
                if self.gate is not None and not self.gate.others_hold_slots():
                    # Nobody can be asking a trial now: a trial left RUNNING unmarked (its
                    # worker was killed between optuna's ask and the mark) goes back at once.
                    self.book.recover(self.record.id, self._config_hash, unowned_grace_s=0)
                progress.phase = "confirming"
                observe(progress)
                confirming = time.perf_counter()
                self._confirm(progress, confirm_with)
                progress.confirm_s = time.perf_counter() - confirming
                if self.gate is not None:
                    self.gate.settle_confirmation()
        except TrialAbandoned:
            progress.phase = "stopped"
        finally:
            self._requeue_untold()
        progress.phase = "done"
        observe(progress)
        return progress

    def _loop(self, progress: StudyProgress, trials: int, budget: TuneBudget,
              deadline: float | None, observe: Observer,
              should_stop: Callable[[], bool]) -> None:
        since_best = 0
        current = self._ask()
        while current is not None and progress.trial_index < trials:
            progress.trial_index += 1
            progress.config, progress.phase = current.config, "measuring"
            observe(progress)
            more = progress.trial_index < trials and not should_stop()
            upcoming = self._ask() if more else None
            if upcoming is not None:
                self.runner.prebuild(MeasureRequest(self.family, self.problem, upcoming.config))
            result = self._outcome_for(current, progress, should_stop)
            self._tell(current, result)
            progress.build_s += result.build_s
            progress.verify_s += result.verify_s
            progress.bench_s += result.bench_s
            progress.store_s = self.store_s
            improved = self._update_best(progress, result)
            since_best = 0 if improved else since_best + 1
            progress.phase = "measured"
            observe(progress)
            out_of_time = deadline is not None and time.perf_counter() >= deadline
            # A campaign judges patience study-wide; the trial asked ahead goes back unrun.
            patience_out = (budget.patience is not None and since_best >= budget.patience
                            or self.gate is not None and self._campaign_patience_spent())
            if should_stop() or out_of_time or patience_out:
                return
            current = upcoming

    def _confirm(self, progress: StudyProgress, settings: ConfirmSettings) -> None:
        record = confirm(
            self.store, self.runner, MeasureRequest(self.family, self.problem, self.default),
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

    def _update_best(self, progress: StudyProgress, result: Outcome) -> bool:
        if result.config == self.default and result.status is TrialStatus.OK:
            progress.default = result
        if result.status is not TrialStatus.OK:
            progress.failed += 1
            return False
        if progress.best is None or result.objective < progress.best.objective:
            progress.best = result
            return True
        return False

    def _absorb_stored_best(self, progress: StudyProgress, rows: list[TrialRow]) -> None:
        for row in rows:
            self._update_best(progress, Outcome.from_row(row))
        progress.failed = 0
