"""Judge a strategy on a recording: several seeded replays, scored and summarized.

Shared by ``xe2tune replay`` and ``benchmarks/strategies.py``; the latter also scores runs of
strategies that are not optuna samplers (Kernel Tuner's) through ``score_run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xe2tune.tuner._replay import Recording, replay
from xe2tune.tuner._score import (
    RandomBaseline,
    methodology_score,
    random_baseline,
    trials_to_fraction,
)

__all__ = ["FRACTIONS", "SeedResult", "StrategyReport", "evaluate", "report_points", "score_run"]

FRACTIONS = (0.90, 0.95, 0.99)
"""Fractions of optimum performance whose trials-to-reach are reported."""


@dataclass(frozen=True)
class SeedResult:
    """One seeded run: its score, best mean time after each trial, and trials to each fraction.

    ``trials_to[k]`` is None if the run never reached ``FRACTIONS[k]`` of optimum performance.
    ``best_index`` is the config index of the best mean found (None if every trial failed).
    """

    seed: int
    score: float
    best_so_far: np.ndarray
    trials_to: tuple[int | None, ...]
    best_index: int | None


@dataclass(frozen=True)
class StrategyReport:
    """Every seed of one strategy on one recording, against the same random baseline."""

    strategy: str
    budget: int
    baseline: RandomBaseline
    seeds: tuple[SeedResult, ...]

    @property
    def mean_score(self) -> float:
        """Mean methodology score over seeds."""
        return float(np.mean([s.score for s in self.seeds]))

    def median_trials_to(self, fraction: float) -> float:
        """Median over seeds of the trials to ``fraction`` of optimum (inf: not reached)."""
        k = FRACTIONS.index(fraction)
        return float(np.median([_or_inf(s.trials_to[k]) for s in self.seeds]))

    def mean_best_at(self, points: Sequence[int]) -> np.ndarray:
        """Mean over seeds of the best mean time after each of ``points`` trials."""
        curves = np.array([s.best_so_far for s in self.seeds])
        return curves[:, np.asarray(points) - 1].mean(axis=0)


def score_run(
    seed: int, means: np.ndarray, indices: np.ndarray, baseline: RandomBaseline, budget: int
) -> SeedResult:
    """Score one run given the recorded mean of each trial's config (NaN = failed), in order.

    A run that stopped before ``budget`` trials (some strategies give up early) keeps its
    last best for the remaining points, as if it had tried nothing better.
    """
    filled = np.where(np.isnan(means), np.inf, means)
    best = np.minimum.accumulate(filled) if len(filled) else np.full(1, np.inf)
    best = np.where(np.isinf(best), baseline.worst, best)
    if len(best) < budget:
        best = np.concatenate([best, np.full(budget - len(best), best[-1])])
    best_index = int(indices[int(np.argmin(filled))]) if np.isfinite(filled).any() else None
    return SeedResult(
        seed=seed,
        score=methodology_score(best, baseline),
        best_so_far=best,
        trials_to=tuple(trials_to_fraction(best, baseline.optimum, f) for f in FRACTIONS),
        best_index=best_index,
    )


def evaluate(
    recording: Recording,
    sampler: str,
    *,
    budget: int | None = None,
    seeds: Sequence[int] = range(10),
    noise: bool = False,
) -> StrategyReport:
    """Replay ``sampler`` once per seed and score every run (budget: the methodology's).

    Raises:
        ValueError: ``budget`` is not in 1..len(space).
        UnknownSamplerError: ``sampler`` is not registered.
    """
    baseline = random_baseline(recording.times, budget)
    budget = baseline.budget if budget is None else budget
    results = []
    for seed in seeds:
        run = replay(recording, sampler, budget=budget, seed=seed, noise=noise)
        results.append(score_run(seed, run.means, run.indices, baseline, budget))
    return StrategyReport(strategy=sampler, budget=budget, baseline=baseline, seeds=tuple(results))


def report_points(budget: int, count: int = 10) -> list[int]:
    """``count`` equidistant trial counts ending at ``budget`` (fewer if the budget is small)."""
    return sorted({max(1, round(budget * k / count)) for k in range(1, count + 1)})


def _or_inf(value: int | None) -> float:
    return float("inf") if value is None else float(value)
