"""Judge a strategy on a recording: several seeded replays, scored and summarized.

Two scores, both 0 for random search and 1 for finding the optimum at once:

- the **methodology score** of Willemsen et al. over simulated tuning time, as its reference
  package computes it (``tuner._methodology``; the seeds' runs are pooled), and
- the **trial-count score**, the same idea counted in trials (``tuner._score``; the mean of the
  seeds' scores).

Each comes with its standard error over seeds. Shared by ``xe2tune replay`` and
``benchmarks/strategies.py``; the latter also scores runs of strategies that are not optuna
samplers (Kernel Tuner's) through ``score_run``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from xe2tune.tuner._methodology import (
    NoRecordedTimeError,
    RunTrace,
    TimeBudget,
    time_budget,
    time_score,
    time_score_error,
    trace,
)
from xe2tune.tuner._replay import Recording, replay
from xe2tune.tuner._score import (
    RandomBaseline,
    random_baseline,
    trial_count_score,
    trials_to_fraction,
)

__all__ = [
    "FRACTIONS", "Baselines", "SeedResult", "StrategyReport", "baselines", "evaluate",
    "report_points", "score_run",
]

FRACTIONS = (0.90, 0.95, 0.99)
"""Fractions of optimum performance whose trials-to-reach are reported."""


@dataclass(frozen=True, eq=False)
class Baselines:
    """What both scores of a recording compare against.

    ``time`` is None when the recording has no cost fields (no methodology score then);
    ``time_error`` says why.
    """

    trials: RandomBaseline
    time: TimeBudget | None
    time_error: str | None = None


def baselines(recording: Recording, max_trials: int | None = None) -> Baselines:
    """The trial-count baseline (at least ``max_trials`` long) and the time budget."""
    trials = random_baseline(recording.times, max_trials)
    try:
        return Baselines(trials, time_budget(recording))
    except (NoRecordedTimeError, ValueError) as exc:
        return Baselines(trials, None, str(exc))


@dataclass(frozen=True)
class SeedResult:
    """One seeded run: its trial-count score, best mean time after each of the first ``budget``
    trials, trials to each fraction, and its trace over simulated time (None without costs).

    ``trials_to[k]`` is None if the run never reached ``FRACTIONS[k]`` of optimum performance.
    ``best_index`` is the config index of the best mean found (None if every trial failed).
    """

    seed: int
    score: float
    best_so_far: np.ndarray
    trials_to: tuple[int | None, ...]
    best_index: int | None
    trace: RunTrace | None = None


@dataclass(frozen=True)
class StrategyReport:
    """Every seed of one strategy on one recording, against the same baselines."""

    strategy: str
    budget: int
    baseline: RandomBaseline
    seeds: tuple[SeedResult, ...]
    time: TimeBudget | None = None

    @property
    def mean_score(self) -> float:
        """Mean trial-count score over seeds."""
        return float(np.mean([s.score for s in self.seeds]))

    @property
    def score_error(self) -> float:
        """Standard error of the mean trial-count score over seeds (NaN for one seed)."""
        scores = [s.score for s in self.seeds]
        if len(scores) < 2:
            return math.nan
        return float(np.std(scores, ddof=1) / math.sqrt(len(scores)))

    def methodology(self) -> tuple[float, float] | None:
        """(methodology score, its jackknife standard error over seeds); None without costs.

        Raises:
            ValueError: the runs do not cover the scored time range (see ``time_score``).
        """
        traces = [s.trace for s in self.seeds]
        if self.time is None or any(t is None for t in traces):
            return None
        return time_score(traces, self.time), time_score_error(traces, self.time)

    def median_trials_to(self, fraction: float) -> float:
        """Median over seeds of the trials to ``fraction`` of optimum (inf: not reached)."""
        k = FRACTIONS.index(fraction)
        return float(np.median([_or_inf(s.trials_to[k]) for s in self.seeds]))

    def mean_best_at(self, points: Sequence[int]) -> np.ndarray:
        """Mean over seeds of the best mean time after each of ``points`` trials."""
        curves = np.array([s.best_so_far for s in self.seeds])
        return curves[:, np.asarray(points) - 1].mean(axis=0)


def score_run(
    seed: int, means: np.ndarray, indices: np.ndarray, baseline: RandomBaseline, budget: int,
    run_trace: RunTrace | None = None,
) -> SeedResult:
    """Score one run given the recorded mean of each trial's config (NaN = failed), in order.

    Only the first ``budget`` trials count for the trial-count score. A run that stopped before
    ``budget`` trials (some strategies give up early) keeps its last best for the remaining
    points, as if it had tried nothing better.
    """
    means, indices = means[:budget], indices[:budget]
    filled = np.where(np.isnan(means), np.inf, means)
    best = np.minimum.accumulate(filled) if len(filled) else np.full(1, np.inf)
    best = np.where(np.isinf(best), baseline.worst, best)
    if len(best) < budget:
        best = np.concatenate([best, np.full(budget - len(best), best[-1])])
    best_index = int(indices[int(np.argmin(filled))]) if np.isfinite(filled).any() else None
    return SeedResult(
        seed=seed,
        score=trial_count_score(best, baseline),
        best_so_far=best,
        trials_to=tuple(trials_to_fraction(best, baseline.optimum, f) for f in FRACTIONS),
        best_index=best_index,
        trace=run_trace,
    )


def evaluate(
    recording: Recording,
    sampler: str,
    *,
    budget: int | None = None,
    seeds: Sequence[int] = range(10),
    noise: bool = False,
    progress: Callable[[], None] | None = None,
) -> StrategyReport:
    """Replay ``sampler`` once per seed and score every run with both scores.

    Each run lasts ``budget`` trials (default: the trial-count budget) and, where the recording
    has costs, at least the methodology's run time.

    Args:
        recording: a brute-forced space, from :func:`load_recording`.
        sampler: one of ``SAMPLER_NAMES``.
        budget: trials per run (None: the trial-count budget of the recording).
        seeds: one replay per seed.
        noise: answer each trial with one recorded raw sample instead of the mean.
        progress: called after each trial of each run.

    Raises:
        ValueError: ``budget`` is not in 1..len(space).
        UnknownSamplerError: ``sampler`` is not registered.
    """
    base = baselines(recording, budget)
    budget = base.trials.budget if budget is None else budget
    until = None if base.time is None else base.time.run_seconds
    results = []
    for seed in seeds:
        run = replay(recording, sampler, budget=budget, seed=seed, noise=noise,
                     until_seconds=until, progress=progress)
        run_trace = None if base.time is None else trace(
            recording, run.indices, run.strategy_seconds)
        results.append(score_run(seed, run.means, run.indices, base.trials, budget, run_trace))
    return StrategyReport(strategy=sampler, budget=budget, baseline=base.trials,
                          seeds=tuple(results), time=base.time)


def report_points(budget: int, count: int = 10) -> list[int]:
    """``count`` equidistant trial counts ending at ``budget`` (fewer if the budget is small)."""
    return sorted({max(1, round(budget * k / count)) for k in range(1, count + 1)})


def _or_inf(value: int | None) -> float:
    return float("inf") if value is None else float(value)
