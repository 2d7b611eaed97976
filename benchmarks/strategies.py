"""Our search strategies against Kernel Tuner's, replayed on brute-forced search spaces.

Usage: python benchmarks/strategies.py SPACE [SPACE ...] [--seeds K] [--kt-seeds K]
       [--ours a,b] [--kt a,b] [--jobs N] [--json FILE]

Every SPACE is a Kernel Tuner cache file (.json or .json.gz; every valid config measured). On each
space, each strategy runs once per seed (our samplers and random search: 0..K-1, 25 by default;
Kernel Tuner's, slower to replay: --kt-seeds, 10 by default). Two scores, both 0 for random
search and 1 for the optimum found at once (Willemsen et al., FGCS 2024):

- the methodology score, over simulated tuning time, as the paper's reference package
  (``autotuning-methodology`` 1.1.0) computes it: every trial costs its recorded compile, run
  and framework time plus the strategy's own time measured live, revisits are billed, the seeds'
  runs are pooled (xe2tune.tuner._methodology). Error: jackknife standard error over seeds.
- the trial-count score: every new config costs one trial, over the trial budget at which random
  search is expected to have closed 95 % of the gap between the median config and the optimum;
  mean over seeds and its standard error. In parentheses: the median number of trials to reach
  95 % of optimum performance (">B": not within the trial budget B, in at least half the seeds).

Our samplers run through optuna's ask/tell on the replay backend until both budgets are spent.
Kernel Tuner's strategies run in its own ``simulation_mode`` on the same file, with Python's and
numpy's global RNGs seeded and ``max_fevals`` the trial budget or 1.2x the methodology's run
time in median trials, whichever is more (a run that ends earlier is held at its last best, as
the reference package does past the median run's end); their live strategy and framework time
is what Kernel Tuner reports per result. Both are scored by the same code.

Kernel Tuner's strategies by default: random_sample, genetic_algorithm, bayes_opt and
dual_annealing, plus pso, the best of its remaining strategies by mean trial-count score over the
two first shared spaces (10 seeds, kernel-tuner 1.5.0: pso 0.58, firefly_algorithm 0.51, diff_evo
0.48, adaptive_tabu_greywolf 0.30, hybrid_vndx 0.15; mls, greedy_ils, simulated_annealing and
basinhopping below 0). Any other can be named with --kt.

Needs the ``bench`` extra (``kernel-tuner``). Runs the seeds in --jobs processes, one BLAS thread
each (through threadpoolctl, which kernel-tuner's scikit-learn brings along).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from xe2tune.tuner import (
    DEFAULT_SAMPLER,
    FRACTIONS,
    StrategyReport,
    baselines,
    evaluate,
    load_recording,
    score_run,
    trace,
)

OURS = (DEFAULT_SAMPLER, "tpe", "random")
KERNEL_TUNER = ("random_sample", "genetic_algorithm", "bayes_opt", "dual_annealing", "pso")

TO_95 = FRACTIONS.index(0.95)  # the trials-to-fraction the table reports

_RECORDINGS: dict[str, tuple] = {}


def _recording(path: str) -> tuple:
    if path not in _RECORDINGS:
        rec = load_recording(path)
        _RECORDINGS[path] = (rec, baselines(rec))
    return _RECORDINGS[path]


def _limit_blas_threads() -> None:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1)


def run_ours(path: str, sampler: str, seed: int) -> tuple:
    """(seed result, seconds) of one seeded replay of our sampler."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rec, _ = _recording(path)
    start = time.perf_counter()
    result = evaluate(rec, sampler, seeds=[seed]).seeds[0]
    return result, time.perf_counter() - start


def run_kernel_tuner(path: str, plain_copy: str, strategy: str, seed: int) -> tuple:
    """(seed result, seconds) of one Kernel Tuner strategy in simulation mode."""
    import kernel_tuner

    rec, base = _recording(path)
    data = json.loads(Path(plain_copy).read_text())
    keys = list(data["tune_params_keys"])
    tune_params = {k: data["tune_params"][k] for k in keys}
    recorded = set(data["cache"])

    def restriction(p):  # only the configs in the file exist (KT calls it with a dict)
        values = [p[k] for k in keys] if isinstance(p, dict) else [p]
        return ",".join(str(v) for v in values) in recorded

    trials = base.trials.budget
    if base.time is not None:  # about enough new configs to outlast the methodology's run time
        trials = max(trials, math.ceil(1.2 * base.time.run_seconds / base.time.median_cost))
    random.seed(seed)
    np.random.seed(seed)
    start = time.perf_counter()
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")
        cache = Path(tmp) / "cache.json"  # KT may reopen its cache for appending: use a copy
        cache.write_text(Path(plain_copy).read_text())
        results, _ = kernel_tuner.tune_kernel(
            data["kernel_name"],
            "",
            data["problem_size"],
            [],
            tune_params,
            restrictions=[restriction],
            cache=str(cache),
            simulation_mode=True,
            strategy=strategy,
            strategy_options={"max_fevals": min(trials, len(rec.space))},
            quiet=True,
            verbose=False,
            lang=None,
        )
    seconds = time.perf_counter() - start
    indices, live = [], []  # every evaluation, revisits included, with its live overhead
    for r in results:
        index = rec.space.index({k: r[k] for k in rec.space.names})
        if index is not None:
            indices.append(index)
            live.append(1e-3 * (r.get("strategy_time", 0.0) + r.get("framework_time", 0.0)))
    order = np.array(list(dict.fromkeys(indices)), dtype=np.int64)  # first visits, in order
    run_trace = None
    if base.time is not None:
        run_trace = trace(rec, np.array(indices, dtype=np.int64), np.array(live))
    result = score_run(seed, rec.times[order], order, base.trials, base.trials.budget, run_trace)
    return result, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spaces", nargs="+", type=Path)
    parser.add_argument("--seeds", type=int, default=25, help="seeds of our samplers")
    parser.add_argument("--kt-seeds", type=int, default=10, help="seeds of Kernel Tuner's")
    parser.add_argument("--ours", default=",".join(OURS))
    parser.add_argument("--kt", default=",".join(KERNEL_TUNER))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write every seed's result here")
    args = parser.parse_args()
    ours = [s for s in args.ours.split(",") if s]
    kt = [s for s in args.kt.split(",") if s]
    seeds = {**{n: args.seeds for n in ours}, **{f"kt:{n}": args.kt_seeds for n in kt}}

    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        ProcessPoolExecutor(args.jobs, initializer=_limit_blas_threads) as pool,
    ):
        futures = {}
        for space in args.spaces:
            path = str(space)
            rec, base = _recording(path)
            plain = Path(tmp) / f"{len(futures)}.json"
            raw = space.read_bytes()
            plain.write_bytes(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
            timing = (
                f"methodology time range {base.time.time_range[0]:.4g}.."
                f"{base.time.time_range[-1]:.4g} s (median trial {base.time.median_cost:.3g} s)"
                if base.time is not None else f"no methodology score: {base.time_error}"
            )
            print(
                f"{space.name}: {len(rec.space)} configs ({int(rec.failed.sum())} failed), "
                f"trial budget {base.trials.budget}, {timing}",
                file=sys.stderr,
            )
            for name in ours:
                for seed in range(args.seeds):
                    futures[(path, name, seed)] = pool.submit(run_ours, path, name, seed)
            for name in kt:
                for seed in range(args.kt_seeds):
                    futures[(path, f"kt:{name}", seed)] = pool.submit(
                        run_kernel_tuner, path, str(plain), name, seed
                    )
        for done, _ in enumerate(as_completed(futures.values()), 1):
            if done % 20 == 0 or done == len(futures):
                print(f"{done}/{len(futures)} runs done", file=sys.stderr, flush=True)
        results = {key: f.result() for key, f in futures.items()}

    strategies = ours + [f"kt:{name}" for name in kt]
    reports = {
        (str(space), name): _report(str(space), name, [results[(str(space), name, k)][0]
                                                        for k in range(seeds[name])])
        for space in args.spaces for name in strategies
    }
    print_tables(args.spaces, strategies, reports)
    print(
        f"\nseeds: {args.seeds} (ours), {args.kt_seeds} (Kernel Tuner); wall time "
        f"{time.perf_counter() - started:.0f} s with {args.jobs} processes; strategy seconds "
        "per run (mean over spaces and seeds):"
    )
    for name in strategies:
        secs = [results[(str(s), name, k)][1] for s in args.spaces for k in range(seeds[name])]
        print(f"  {name}: {np.mean(secs):.2f}")
    if args.json:
        args.json.write_text(json.dumps(
            [{"space": p, "strategy": n, "seed": k, "trial_count_score": r.score,
              "trials_to_95": r.trials_to[TO_95], "seconds": secs}
             for (p, n, k), (r, secs) in results.items()],
            indent=1,
        ))


def _report(path: str, name: str, runs: list) -> StrategyReport:
    rec, base = _recording(path)
    return StrategyReport(strategy=name, budget=base.trials.budget, baseline=base.trials,
                          seeds=tuple(runs), time=base.time)


def print_tables(spaces: list[Path], strategies: list[str], reports: dict) -> None:
    """Two tables, one row per strategy: the methodology score and the trial-count score
    (with the median trials to 95 %), each ± its standard error, per space and on average."""
    names = [s.name.split(".")[0] for s in spaces]
    width = max(len(n) for n in names + ["x" * 22])

    def table(title: str, cell) -> None:
        print(f"\n{title}\n{'strategy':22s}" + "".join(f"{n:>{width + 2}s}" for n in names)
              + f"{'mean':>9s}")
        for strategy in strategies:
            cells, values = [], []
            for space in spaces:
                text, value = cell(reports[(str(space), strategy)])
                cells.append(text)
                values.append(value)
            mean = f"{np.mean(values):9.3f}" if all(math.isfinite(v) for v in values) else ""
            print(f"{strategy:22s}" + "".join(f"{c:>{width + 2}s}" for c in cells) + mean)

    def methodology(report: StrategyReport) -> tuple[str, float]:
        try:
            scored = report.methodology()
        except ValueError:  # a run ended before the scored range (some strategies stop early)
            return "n/a (short run)", math.nan
        if scored is None:
            return "n/a", math.nan
        return f"{scored[0]:.3f} ± {scored[1]:.3f}", scored[0]

    def trial_count(report: StrategyReport) -> tuple[str, float]:
        t95 = report.median_trials_to(0.95)
        reach = f">{report.budget}" if math.isinf(t95) else f"{t95:g}"
        return f"{report.mean_score:.3f} ± {report.score_error:.3f} ({reach})", report.mean_score

    table("methodology score (time-based, runs pooled) ± jackknife standard error", methodology)
    table("trial-count score ± standard error (median trials to 95 % of optimum)", trial_count)


if __name__ == "__main__":
    main()
