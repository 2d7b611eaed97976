"""The trial-count score (Willemsen et al. counted in trials): exact random baseline; 0 for
random search, 1 for an oracle. The time-based score is tests/tuner/test_methodology_score.py."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _spaces import SYNTHETIC_PARAMS, synthetic_time, write_cache

from xe2tune.tuner import (
    evaluate,
    load_recording,
    random_baseline,
    score_points,
    trial_count_score,
    trials_to_fraction,
)


def best_curve(times: np.ndarray, order: np.ndarray, worst: float) -> np.ndarray:
    picked = np.where(np.isnan(times[order]), np.inf, times[order])
    best = np.minimum.accumulate(picked)
    return np.where(np.isinf(best), worst, best)


def test_random_baseline_is_the_exact_expected_best_without_replacement():
    times = np.array([5.0, 1.0, np.nan, 3.0, 2.0, 8.0, np.nan])
    base = random_baseline(times, max_trials=len(times))
    valid = times[~np.isnan(times)]
    for t in range(1, len(times) + 1):
        draws = list(itertools.combinations(range(len(times)), t))
        bests = [np.nanmin(np.append(times[list(d)], np.inf)) for d in draws]
        expected = np.mean([b if math.isfinite(b) else valid.max() for b in bests])
        assert base.expected_best[t - 1] == pytest.approx(expected, rel=1e-12)
    assert (base.optimum, base.median, base.worst) == (1.0, 3.0, 8.0)


def test_trial_budget_is_where_random_closes_95_percent_of_the_gap():
    times = np.linspace(1.0, 3.0, 500)
    base = random_baseline(times)
    target = base.optimum + 0.05 * (base.median - base.optimum)
    assert base.expected_best[base.budget - 1] <= target < base.expected_best[base.budget - 2]
    assert score_points(base.budget)[0] == math.ceil(0.01 * base.budget)
    assert score_points(base.budget)[-1] == base.budget


def test_random_search_scores_about_zero_and_an_oracle_one():
    rng = np.random.default_rng(0)
    times = np.exp(rng.normal(0.0, 0.5, 600))
    times[rng.choice(600, 30, replace=False)] = np.nan
    base = random_baseline(times)
    worst = base.worst
    random_scores = [
        trial_count_score(best_curve(times, rng.permutation(600), worst), base) for _ in range(2000)
    ]
    assert abs(np.mean(random_scores)) < 0.05
    oracle = np.argsort(np.where(np.isnan(times), np.inf, times))
    assert trial_count_score(best_curve(times, oracle, worst), base) == pytest.approx(1.0)
    assert trial_count_score(base.expected_best, base) == pytest.approx(0.0, abs=1e-12)


def test_random_sampler_replayed_through_optuna_scores_about_zero(tmp_path):
    path = write_cache(tmp_path / "synthetic.json", SYNTHETIC_PARAMS, synthetic_time)
    report = evaluate(load_recording(path), "random", seeds=range(40))
    assert abs(report.mean_score) < 0.25


def test_trials_to_fraction_of_optimum_performance():
    best = np.array([4.0, 2.0, 1.1, 1.04, 1.0])
    assert trials_to_fraction(best, 1.0, 0.90) == 3
    assert trials_to_fraction(best, 1.0, 0.95) == 4
    assert trials_to_fraction(best, 1.0, 0.99) == 5
    assert trials_to_fraction(best[:3], 1.0, 0.99) is None
