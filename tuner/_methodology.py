"""The methodology score of Willemsen et al. (FGCS 2024), over simulated tuning time.

This is the score as the paper's reference implementation, PyPI ``autotuning-methodology`` 1.1.0,
computes it (``report_experiments.get_strategy_scores``); each step below names the function of
that package it follows, and ``tests/tuner/test_methodology_score.py`` checks the agreement.

- A trial costs what it cost when the space was recorded: compile + verification time on the
  first visit of a config, and on every visit the sum of its raw run times, the recorded
  framework and strategy time and the strategy's own time in the run being scored (measured
  live). As in Kernel Tuner's simulation mode, a revisited config is billed again, without the
  compile and verification time (``runners/simulation.py``).
- Space statistics (``SearchspaceStatistics``): the sorted *valid* mean times (failed configs
  are left out of the baseline) and, per config, the recorded total cost.
- Budget (``cutoff_point_fevals_time_start_end``): the trial counts at which random search's
  expected rank ``r = round(M (N + 1) / (M + 1))`` first reaches 1 % and 95 % of the gap from the
  median to the optimum, ``ceil(i / (N + 1 - i))``, times the median recorded cost; runs get
  1.1x the end time (``experiments.calculate_budget``). The score averages 1,000 equidistant
  time points over [start, end].
- Baseline (``RandomSearchCalculatedBaseline``): at time t, the valid value at that expected
  rank after ``round(t / c)`` trials, c the expected cost per trial (failures included),
  smoothed by monotone cubic (PCHIP) interpolation.
- Strategy curve (``StochasticOptimizationAlgorithm.get_curve_over_time``): the repeats are
  pooled: every (cumulative time, rank of the best so far) pair of every run near the time
  range is fitted by one decreasing isotonic regression, evaluated at the time points and
  rounded to a rank. Past the "real stopping point" (the first run end after the median run end)
  the curve is held. The package fits a bagged ensemble of isotonic regressions (random
  bootstrap samples); this module fits the isotonic regression itself, the bagging's target,
  so it is deterministic.
- Score: the mean over the time points of ``(baseline_t - curve_t) / (baseline_t - optimum)``.

The standard error of the pooled score over seeds is its leave-one-seed-out jackknife estimate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xe2tune.tuner._replay import Recording

__all__ = [
    "TIME_POINTS",
    "NoRecordedTimeError",
    "RunTrace",
    "TimeBudget",
    "time_budget",
    "time_score",
    "time_score_error",
    "trace",
    "trial_seconds",
]

TIME_POINTS = 1000
"""Points of the time range the score averages over (the package's ``resolution``)."""
RUN_MARGIN = 0.1
"""Runs get this much more time than the budget (the package's ``cutoff_margin``)."""
_START, _END = 0.01, 0.95  # fractions of the median-to-optimum gap: the scored time range


class NoRecordedTimeError(ValueError):
    """The recording has no cost fields (compile, run, framework times): no time-based score."""


@dataclass(frozen=True)
class RunTrace:
    """One run: cumulative tuning seconds after each trial and the best valid time so far.

    ``best[k]`` is NaN until the run's first valid config.
    """

    elapsed: np.ndarray
    best: np.ndarray


@dataclass(frozen=True, eq=False)
class TimeBudget:
    """A space's time range, its random-search baseline over it, and its reference values."""

    valid_sorted: np.ndarray
    optimum: float
    time_range: np.ndarray
    baseline: np.ndarray
    run_seconds: float
    """How long a run must go on: 1.1x the end of the time range."""
    median_cost: float


def trial_seconds(
    recording: Recording, indices: np.ndarray, strategy_seconds: np.ndarray
) -> np.ndarray:
    """What each trial of a run cost: recorded build (first visit only) and run cost, plus
    ``strategy_seconds`` (the strategy's live time per trial).

    Raises:
        NoRecordedTimeError: the recording has no cost fields.
    """
    _require_costs(recording)
    indices = np.asarray(indices, dtype=np.int64)
    first = np.zeros(len(indices), dtype=bool)
    first[np.unique(indices, return_index=True)[1]] = True
    build = np.nan_to_num(recording.build_seconds[indices])
    run = np.nan_to_num(recording.run_seconds[indices])
    return np.where(first, build, 0.0) + run + np.asarray(strategy_seconds, dtype=float)


def trace(recording: Recording, indices: np.ndarray, strategy_seconds: np.ndarray) -> RunTrace:
    """The run's cumulative time and best-so-far curve, as the reference package records them."""
    elapsed = np.cumsum(trial_seconds(recording, indices, strategy_seconds))
    means = recording.times[np.asarray(indices, dtype=np.int64)]
    best = np.fmin.accumulate(means) if len(means) else means
    return RunTrace(elapsed=elapsed, best=best)


def time_budget(recording: Recording) -> TimeBudget:
    """The scored time range and the random baseline over it (see the module docstring).

    Raises:
        NoRecordedTimeError: the recording has no cost fields.
        ValueError: the space is degenerate (random search finds the optimum at once).
    """
    _require_costs(recording)
    valid = np.sort(recording.times[~recording.failed])
    optimum, median = float(valid[0]), float(np.median(valid))
    totals = recording.build_seconds + recording.run_seconds
    median_cost = float(np.median(totals[~np.isnan(totals)]))
    start = _cutoff_trials(valid, optimum, median, _START)
    end = _cutoff_trials(valid, optimum, median, _END)
    if end - start < 2:  # the package's safety margin, its bug included: the cap is a time value
        if start == 0:
            end = min(optimum, end + 2)
        else:
            end, start = min(optimum, end + 1), start - 1
    if end - start == 0:
        raise ValueError("the start and end of the scored range are the same trial")
    time_range = np.linspace(start * median_cost, end * median_cost, TIME_POINTS)
    baseline = _random_curve(recording, valid, time_range)
    if (baseline <= optimum).any():  # the package fails on this division by zero too
        raise ValueError("random search is expected to reach the optimum within the scored range")
    return TimeBudget(
        valid_sorted=valid,
        optimum=optimum,
        time_range=time_range,
        baseline=baseline,
        run_seconds=float(time_range[-1]) * (1.0 + RUN_MARGIN),
        median_cost=median_cost,
    )


def time_score(traces: Sequence[RunTrace], budget: TimeBudget) -> float:
    """The methodology score of pooled runs: 0 = random search, 1 = the optimum throughout.

    Raises:
        ValueError: a run has fewer than two points in the scored range (it stopped too early),
            or runs stop before the range starts.
    """
    curve = _pooled_curve(traces, budget)
    gap = budget.baseline - budget.optimum
    return float(np.mean((budget.baseline - curve) / gap))


def time_score_error(traces: Sequence[RunTrace], budget: TimeBudget) -> float:
    """Jackknife standard error of ``time_score`` over the runs (NaN for fewer than 2)."""
    n = len(traces)
    if n < 2:
        return math.nan
    left_out = np.array([time_score([*traces[:k], *traces[k + 1 :]], budget) for k in range(n)])
    return float(math.sqrt((n - 1) / n * ((left_out - left_out.mean()) ** 2).sum()))


def _require_costs(recording: Recording) -> None:
    if np.isnan(recording.build_seconds + recording.run_seconds).all():
        raise NoRecordedTimeError(
            f"{recording.source} records no compile, run or framework times per config; the "
            "time-based methodology score needs them (Kernel Tuner cache or T4 file fields)"
        )


def _cutoff_trials(valid: np.ndarray, optimum: float, median: float, fraction: float) -> int:
    """``SearchspaceStatistics.cutoff_point``: trials for random search to close ``fraction``."""
    target = optimum + (median - optimum) * (1.0 - fraction)
    descending = valid[::-1]
    n = len(descending)
    i = int(np.flatnonzero(descending <= target)[0])
    if descending[i] == optimum:
        if i == 0:
            raise ValueError("random search finds the optimum at once in this space")
        i -= 1
    return math.ceil(i / (n + 1 - i))


def _random_curve(recording: Recording, valid: np.ndarray, time_range: np.ndarray) -> np.ndarray:
    """``RandomSearchCalculatedBaseline.get_curve_over_time``: value at random search's rank."""
    totals = recording.build_seconds + recording.run_seconds
    failed = recording.failed
    per_trial = float(np.mean(totals[~failed]))
    if failed.any():
        per_trial += failed.mean() * float(np.mean(totals[failed]))
    trials = np.round(np.maximum(time_range / per_trial, 1)).astype(int)
    n = len(valid)
    descending = valid[::-1]
    ranks = [min(n - 1, round(m * (n + 1) / (m + 1))) for m in trials.tolist()]
    draws = descending[ranks]
    if len(trials) <= 2:
        return draws
    first = np.concatenate([[True], np.diff(trials) > 0])
    x, y = trials[first].astype(float), draws[first]
    if len(x) < 2:
        return draws
    return _pchip(x, y, np.linspace(trials[0], trials[-1], len(trials)))


def _pooled_curve(traces: Sequence[RunTrace], budget: TimeBudget) -> np.ndarray:
    """The pooled best-so-far over the time range (``get_curve_over_time`` without bagging)."""
    time_range, valid = budget.time_range, budget.valid_sorted
    lengths = [len(t.elapsed) for t in traces]
    length = max(lengths)
    if length > 2 * np.mean(lengths):  # the package cuts an outlier run (``write_results``)
        length = int(2 * np.mean(lengths))
    times = np.full((length, len(traces)), np.nan)
    values = np.full((length, len(traces)), np.nan)
    for k, t in enumerate(traces):
        times[: len(t.elapsed), k] = t.elapsed[:length]
        values[: len(t.best), k] = t.best[:length]
    keep = ~np.isnan(values).all(axis=1)
    times, values = times[keep], values[keep]
    times[np.isnan(values)] = np.nan
    ends = np.sort(np.nanmax(times, axis=0))
    later = ends[np.nanmedian(ends) < ends]
    stop = float(later[0]) if later.size else float(time_range[-1])
    margin = 0.1 + 0.25 * len(traces) / times.size
    low, high = time_range[0] * (1 - margin), time_range[-1] * (1 + margin)
    inside = (low <= times) & (times <= high)
    if not (np.count_nonzero(inside, axis=0) > 1).all():
        raise ValueError(
            "a run has fewer than two trials in the scored time range "
            f"({low:.4g} .. {high:.4g} s): it stopped too early"
        )
    x, y = times[inside], np.searchsorted(valid, values[inside], side="left").astype(float)
    ranks = _isotonic_decreasing(x, y, time_range)
    curve = valid[np.clip(np.round(ranks).astype(int), 0, len(valid) - 1)]
    if stop < time_range[-1]:
        if stop <= time_range[0]:
            raise ValueError("the runs stop before the scored time range starts")
        held = int(np.flatnonzero(time_range > stop)[0])
        curve[held:] = curve[held]
    return curve


def _isotonic_decreasing(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Least-squares non-increasing fit of y(x) (pool adjacent violators), linearly
    interpolated at ``at`` and clipped at the ends, as scikit-learn's ``IsotonicRegression``."""
    order = np.argsort(x, kind="mergesort")
    xs, ys = x[order], y[order]
    ux, start = np.unique(xs, return_index=True)
    weights = np.diff(np.append(start, len(xs))).astype(float)
    means = np.add.reduceat(ys, start) / weights
    level, weight, width = [], [], []
    for m, w in zip(means.tolist(), weights.tolist(), strict=True):
        level.append(m)
        weight.append(w)
        width.append(1)
        while len(level) > 1 and level[-2] < level[-1]:  # a violation of non-increasing
            w_sum = weight[-2] + weight[-1]
            level[-2] = (level[-2] * weight[-2] + level[-1] * weight[-1]) / w_sum
            weight[-2], width[-2] = w_sum, width[-2] + width[-1]
            del level[-1], weight[-1], width[-1]
    fitted = np.repeat(level, width)
    return np.interp(at, ux, fitted)


def _pchip(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Monotone piecewise cubic Hermite interpolation (Fritsch-Butland derivatives, SciPy's
    ``PchipInterpolator`` edge rule)."""
    h = np.diff(x)
    m = np.diff(y) / h
    d = np.zeros_like(y)
    if len(x) == 2:
        d[:] = m[0]
    else:
        w1, w2 = 2 * h[1:] + h[:-1], h[1:] + 2 * h[:-1]
        same = (np.sign(m[:-1]) == np.sign(m[1:])) & (m[:-1] != 0) & (m[1:] != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            harmonic = (w1 + w2) / (w1 / m[:-1] + w2 / m[1:])
        d[1:-1] = np.where(same, harmonic, 0.0)
        d[0] = _pchip_edge(h[0], h[1], m[0], m[1])
        d[-1] = _pchip_edge(h[-1], h[-2], m[-1], m[-2])
    k = np.clip(np.searchsorted(x, at, side="right") - 1, 0, len(x) - 2)
    t = (at - x[k]) / h[k]
    h00, h10 = (1 + 2 * t) * (1 - t) ** 2, t * (1 - t) ** 2
    h01, h11 = t * t * (3 - 2 * t), t * t * (t - 1)
    return h00 * y[k] + h10 * h[k] * d[k] + h01 * y[k + 1] + h11 * h[k] * d[k + 1]


def _pchip_edge(h0: float, h1: float, m0: float, m1: float) -> float:
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    if np.sign(d) != np.sign(m0):
        return 0.0
    if np.sign(m0) != np.sign(m1) and abs(d) > abs(3 * m0):
        return 3 * m0
    return d
