"""The time-based methodology score against its reference package, PyPI autotuning-methodology.

The package is the ``methodology`` extra; CI installs it, so nothing here skips there. Its
time range and random baseline are deterministic and must match ours to rounding; its strategy
curve fits a bagged ensemble of isotonic regressions on random bootstrap samples (numpy's global
generator, seeded here), ours the isotonic regression itself, so scores agree within a stated
tolerance, measured on the shared spaces: at most 0.009 apart (the package's own spread over
bagging seeds: 0.003-0.008).
"""

from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pytest
from _reference_methodology import TIME_KEYS, reference_score, write_t4
from _spaces import example

from xe2tune.tuner import load_recording, time_budget, time_score, trace, trial_seconds

TOLERANCE = 0.025
"""|ours - package| on 25 pooled runs, against the mean of 5 seeded bagging draws."""


@pytest.fixture(scope="module", params=["pnpoly_RTX_3090", "convolution_milo_W7800"])
def space(request, tmp_path_factory):
    """A shared space (one with a large and one with a tiny budget, both with failed configs),
    our recording of it, and the same space as the package's T4 file."""
    path = example(request.param)
    t4 = write_t4(json.loads(gzip.decompress(path.read_bytes())),
                  tmp_path_factory.mktemp("t4") / f"{request.param}.json")
    return load_recording(path), t4


def package_statistics(t4):
    from autotuning_methodology.searchspace_statistics import SearchspaceStatistics

    return SearchspaceStatistics("app", "dev", True, TIME_KEYS, ["time"], t4, full_validate=False)


def test_time_range_and_random_baseline_match_the_package(space):
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline

    recording, t4 = space
    ours = time_budget(recording)
    stats = package_statistics(t4)
    _, _, start, end = stats.cutoff_point_fevals_time_start_end(0.01, 0.95)
    time_range = np.linspace(start, end, 1000)
    np.testing.assert_allclose(ours.time_range, time_range, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        baseline = RandomSearchCalculatedBaseline(stats).get_curve(time_range, "time")
    np.testing.assert_allclose(ours.baseline, baseline, rtol=1e-12)
    assert ours.run_seconds == pytest.approx(1.1 * end)


def runs(recording, budget, bias: float, seed: int) -> list:
    """25 fixed runs: configs drawn without replacement, weighted towards fast ones by ``bias``
    (0: random search), with a made-up live strategy time per trial."""
    rng = np.random.default_rng(seed)
    n = len(recording.space)
    rank = np.argsort(np.argsort(np.where(recording.failed, np.inf, recording.times)))
    weights = np.exp(-bias * 10 * rank / n)
    length = min(n, int(3 * budget.run_seconds / budget.median_cost) + 5)
    traces = []
    for _ in range(25):
        indices = rng.choice(n, size=length, replace=False, p=weights / weights.sum())
        traces.append(trace(recording, indices, rng.uniform(0.0, 0.05, length)))
    return traces


@pytest.mark.parametrize("bias", [0.0, 3.0], ids=["random-search", "good-strategy"])
def test_score_of_fixed_runs_agrees_with_the_package(space, bias):
    recording, t4 = space
    budget = time_budget(recording)
    traces = runs(recording, budget, bias, seed=1)
    ours = time_score(traces, budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        package = np.mean([reference_score(t4, traces, seed) for seed in range(5)])
    assert abs(ours - package) <= TOLERANCE, (ours, package)
    if bias:
        assert ours > 0.9  # a strategy that mostly picks fast configs is near the optimum
    else:
        assert abs(ours) < 0.3  # random search is the baseline


def test_isotonic_fit_is_scikit_learns():
    from sklearn.isotonic import IsotonicRegression

    from xe2tune.tuner._methodology import _isotonic_decreasing

    rng = np.random.default_rng(4)
    x = np.round(rng.uniform(0, 10, 400), 1)  # ties, as pooled runs can have
    y = 50 - 4 * x + rng.normal(0, 6, 400)
    at = np.linspace(-1, 11, 300)
    expected = IsotonicRegression(increasing=False, out_of_bounds="clip").fit(x, y).predict(at)
    np.testing.assert_allclose(_isotonic_decreasing(x, y, at), expected, rtol=1e-9, atol=1e-9)


def test_a_trial_costs_build_once_run_every_time_plus_live_strategy_time(space):
    recording, _ = space
    i, j = 3, 5
    seconds = trial_seconds(recording, np.array([i, j, i]), np.array([0.5, 0.25, 0.125]))
    build, run = recording.build_seconds, recording.run_seconds
    assert seconds[0] == pytest.approx(build[i] + run[i] + 0.5)
    assert seconds[1] == pytest.approx(build[j] + run[j] + 0.25)
    assert seconds[2] == pytest.approx(run[i] + 0.125)  # a revisit: no compile, billed again
    assert build[i] > 0 and run[i] > 0
