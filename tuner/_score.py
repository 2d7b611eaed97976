"""The trial-count score: the methodology of Willemsen et al. (FGCS 2024) counted in trials.

Every config costs one trial here, whatever it cost to compile and run; the paper's own score,
over simulated tuning time, is ``tuner._methodology``. This variant is kept because it does not
depend on the recorded costs (some files have none) and reads directly as "trials to".

At each budget point t, ``P_t = (baseline_t - best_t) / (baseline_t - optimum)``, where
``baseline_t`` is the expected best of random search *without replacement* after t evaluations:
0 = no better than random search, 1 = the optimum found. The trial-count score is the mean of
``P_t`` over the equidistant points t = ceil(1 % of B) .. B (every integer in between), where the
budget B is the number of evaluations after which random search is expected to have closed 95 %
of the gap between the median config and the optimum.

Failed configs take draws like any other config but yield nothing; until a run has found a
config that did not fail, its best is taken to be the worst valid time, in the baseline as in
the run being scored, so both are judged alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "GAP_CLOSED",
    "RandomBaseline",
    "trial_count_score",
    "random_baseline",
    "score_points",
    "trials_to_fraction",
]

GAP_CLOSED = 0.95
"""Fraction of the median-to-optimum gap random search closes at the trial budget."""


@dataclass(frozen=True, eq=False)
class RandomBaseline:
    """Expected best of random search without replacement, and the space's reference values.

    ``expected_best[t - 1]`` is the expected best mean time after t evaluations.
    """

    expected_best: np.ndarray
    optimum: float
    median: float
    worst: float
    budget: int

    def __post_init__(self) -> None:
        self.expected_best.setflags(write=False)


def random_baseline(times: np.ndarray, max_trials: int | None = None) -> RandomBaseline:
    """Random search's expected best after 1..T evaluations of a space (NaN times = failed).

    T is at least the trial budget and at least ``max_trials`` (capped at the space size).
    With the valid times sorted, v_1 <= ... <= v_M, and the N - M failed configs ranked last
    (worth v_M), ``E[best_t] = v_1 + sum_k S_t(k) (v_{k+1} - v_k)``, where
    ``S_t(k) = C(N-k, t) / C(N, t)`` is the chance that none of the k best was drawn; S is
    updated in place from t to t + 1, so the whole curve costs O(N T).

    Raises:
        ValueError: ``times`` has no valid (non-NaN) entry.
    """
    times = np.asarray(times, dtype=float)
    n = times.size
    valid = np.sort(times[~np.isnan(times)])
    if valid.size == 0:
        raise ValueError("no valid time in the space")
    optimum, worst, median = float(valid[0]), float(valid[-1]), float(np.median(valid))
    ranked = np.concatenate([valid, np.full(n - valid.size, worst)])
    steps = np.diff(ranked)
    k = np.arange(1, n, dtype=float)
    target = optimum + (1.0 - GAP_CLOSED) * (median - optimum)
    limit = n if max_trials is None else min(n, max_trials)
    survive = np.ones(n - 1)
    curve: list[float] = []
    budget = None
    for t in range(1, n + 1):
        survive *= np.clip((n - k - (t - 1)) / (n - (t - 1)), 0.0, None)
        curve.append(optimum + float(survive @ steps))
        if budget is None and curve[-1] <= target + 1e-12 * abs(target):
            budget = t
        if budget is not None and t >= limit:
            break
    return RandomBaseline(
        expected_best=np.array(curve),
        optimum=optimum,
        median=median,
        worst=worst,
        budget=budget if budget is not None else n,
    )


def score_points(budget: int) -> np.ndarray:
    """The budget points the score averages over: every t from ceil(1 % of budget) to budget."""
    return np.arange(max(1, math.ceil(0.01 * budget)), budget + 1)


def trial_count_score(best_so_far: np.ndarray, baseline: RandomBaseline) -> float:
    """Mean of P_t over the score points of the trial budget (or of a shorter run).

    ``best_so_far[t - 1]`` is the run's best mean time after t trials (the worst valid time
    before its first success). A run shorter than the trial budget is scored on the
    points it covers, from the same start.

    Raises:
        ValueError: the run is shorter than the first score point.
    """
    points = score_points(baseline.budget)
    points = points[points <= len(best_so_far)]
    if points.size == 0:
        raise ValueError(f"a run of {len(best_so_far)} trials covers no score point")
    base = baseline.expected_best[points - 1]
    best = np.asarray(best_so_far, dtype=float)[points - 1]
    gap = base - baseline.optimum
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(gap > 0, (base - best) / gap, np.where(best <= baseline.optimum, 1.0, 0.0))
    return float(p.mean())


def trials_to_fraction(best_so_far: np.ndarray, optimum: float, fraction: float) -> int | None:
    """Trials until the best reaches ``fraction`` of optimum performance (optimum / best).

    Returns None if the run never gets there.
    """
    reached = np.flatnonzero(optimum / np.asarray(best_so_far, dtype=float) >= fraction - 1e-12)
    return int(reached[0]) + 1 if reached.size else None
