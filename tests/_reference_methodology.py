"""Score runs with the reference package, PyPI ``autotuning-methodology`` (the ``bench`` extra).

The package's own code does every step: ``SearchspaceStatistics`` reads the space as a T4 file,
``runner.write_results`` turns the runs into its arrays, ``get_strategies_aggregated_performance``
pools, baselines and standardizes them, and the score is the mean of that curve, as in
``report_experiments.get_strategy_scores``. Only the tuner itself is left out: the runs are
given as traces (cumulative seconds and best time after each trial), so both sides score the
same runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from xe2tune.tuner import RunTrace

TIME_KEYS = ["compilation", "runtimes", "framework", "search_algorithm", "validation"]


def write_t4(cache_file: dict, path: Path) -> Path:
    """A Kernel Tuner cache (parsed JSON) as the T4 file the package reads (milliseconds)."""
    keys = cache_file["tune_params_keys"]
    results = []
    for entry in cache_file["cache"].values():
        failed = isinstance(entry["time"], str)
        results.append({
            "configuration": {k: entry[k] for k in keys},
            "times": {
                "compilation": entry.get("compile_time", 0),
                "runtimes": entry.get("times", []) if not failed else [],
                "framework": entry.get("framework_time", 0),
                "search_algorithm": entry.get("strategy_time", 0),
                "validation": entry.get("verification_time", 0),
            },
            "invalidity": "runtime" if failed else "correct",
            "correctness": 1,
            "measurements": [{"name": "time", "value": entry["time"], "unit": "ms"}],
        })
    data = {"schema_version": "1.0.0", "metadata": {"timeunit": "milliseconds"},
            "results": results}
    path.write_text(json.dumps(data))
    return path


def reference_score(t4_path: Path, runs: list[RunTrace], seed: int) -> float:
    """The package's methodology score of ``runs``.

    Each trial is handed over as its cost and its run's best so far (a trial before the first
    valid one as failed): the package keeps no more of a run than the cumulative time and the
    best so far.

    ``seed`` seeds numpy's global generator, which the package's bagging draws from.
    """
    from autotuning_methodology.baseline import RandomSearchCalculatedBaseline
    from autotuning_methodology.report_experiments import get_strategies_aggregated_performance
    from autotuning_methodology.runner import write_results
    from autotuning_methodology.searchspace_statistics import SearchspaceStatistics

    stats = SearchspaceStatistics(
        application_name="app", device_name="dev", minimization=True,
        objective_time_keys=TIME_KEYS, objective_performance_keys=["time"],
        full_search_space_file_path=t4_path, full_validate=False,
    )
    repeats = []
    for run in runs:
        cost = np.diff(run.elapsed, prepend=0.0)
        repeat = []
        for seconds, best in zip(cost.tolist(), run.best.tolist(), strict=True):
            failed = bool(np.isnan(best))
            repeat.append({
                "invalidity": "runtime" if failed else "correct",
                "times": {"compilation": 0.0, "runtimes": [seconds], "framework": 0.0,
                          "search_algorithm": 0.0, "validation": 0.0},
                "measurements": [{"name": "time",
                                  "value": "RuntimeFailedConfig" if failed else best}],
            })
        repeats.append(repeat)
    description = _Description()
    write_results(repeats, description, compressed=False)

    from autotuning_methodology.curves import StochasticOptimizationAlgorithm

    curve = StochasticOptimizationAlgorithm(description)
    fevals_start, fevals_end, time_start, time_end = stats.cutoff_point_fevals_time_start_end(
        0.01, 0.95
    )
    time_range = np.linspace(time_start, time_end, 1000)
    fevals_range = np.arange(fevals_start, fevals_end + 1)
    np.random.seed(seed)
    performance, _, _, _ = get_strategies_aggregated_performance(
        [(RandomSearchCalculatedBaseline(stats), [curve], stats, time_range, fevals_range)], 0.95
    )
    return float(np.mean(performance[0]))


class _Description:
    """The part of ``caching.ResultsDescription`` that ``write_results`` and ``Curve`` use."""

    group_name = group_display_name = "strategy"
    device_name = "dev"
    application_name = "app"
    stochastic = True
    minimization = True
    objective_time_keys = TIME_KEYS
    objective_performance_keys = ["time"]

    def set_results(self, arrays: dict) -> None:
        self._arrays = arrays

    def get_results(self) -> SimpleNamespace:
        return SimpleNamespace(**self._arrays)
