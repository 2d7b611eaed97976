"""Our search strategies against Kernel Tuner's, replayed on brute-forced search spaces.

Usage: python benchmarks/strategies.py SPACE [SPACE ...] [--seeds K] [--ours a,b]
       [--kt a,b] [--jobs N] [--json FILE]

Every SPACE is a Kernel Tuner cache file (.json or .json.gz; every valid config measured). On each
space, each strategy runs once per seed (0..K-1) with the same budget: the methodology budget of
Willemsen et al., at which random search is expected to have closed 95 % of the gap between the
median config and the optimum. Our samplers run through optuna's ask/tell on the replay backend;
Kernel Tuner's strategies run in its own ``simulation_mode`` on the same file, with ``max_fevals``
set to that budget and Python's and numpy's global RNGs seeded. Both are scored the same way, on
the recorded mean times of the unique configs in the order they were first evaluated (a strategy
that stops early keeps its last best). The table gives the mean methodology score over seeds
(0 = random search, 1 = optimum found at once) and, in parentheses, the median number of trials to
reach 95 % of optimum performance (">B": not within the budget, in at least half of the seeds).

Kernel Tuner's strategies by default: random_sample, genetic_algorithm, bayes_opt and
dual_annealing, plus pso, the best of its remaining strategies by mean score over the two shared
spaces (10 seeds, kernel-tuner 1.5.0: pso 0.58, firefly_algorithm 0.51, diff_evo 0.48,
adaptive_tabu_greywolf 0.30, hybrid_vndx 0.15; mls, greedy_ils, simulated_annealing and
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
    evaluate,
    load_recording,
    random_baseline,
    score_run,
)

OURS = (DEFAULT_SAMPLER, "tpe", "random")
KERNEL_TUNER = ("random_sample", "genetic_algorithm", "bayes_opt", "dual_annealing", "pso")

TO_95 = FRACTIONS.index(0.95)  # the trials-to-fraction the table reports

_RECORDINGS: dict[str, tuple] = {}


def _recording(path: str) -> tuple:
    if path not in _RECORDINGS:
        rec = load_recording(path)
        _RECORDINGS[path] = (rec, random_baseline(rec.times))
    return _RECORDINGS[path]


def _limit_blas_threads() -> None:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1)


def run_ours(path: str, sampler: str, seed: int) -> tuple[float, int | None, float]:
    """(score, trials to 95 %, seconds) of one seeded replay of our sampler."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rec, _ = _recording(path)
    start = time.perf_counter()
    result = evaluate(rec, sampler, seeds=[seed]).seeds[0]
    return result.score, result.trials_to[TO_95], time.perf_counter() - start


def run_kernel_tuner(
    path: str, plain_copy: str, strategy: str, seed: int
) -> tuple[float, int | None, float]:
    """(score, trials to 95 %, seconds) of one Kernel Tuner strategy in simulation mode."""
    import kernel_tuner

    rec, base = _recording(path)
    data = json.loads(Path(plain_copy).read_text())
    keys = list(data["tune_params_keys"])
    tune_params = {k: data["tune_params"][k] for k in keys}
    recorded = set(data["cache"])

    def restriction(p):  # only the configs in the file exist (KT calls it with a dict)
        values = [p[k] for k in keys] if isinstance(p, dict) else [p]
        return ",".join(str(v) for v in values) in recorded

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
            strategy_options={"max_fevals": base.budget},
            quiet=True,
            verbose=False,
            lang=None,
        )
    seconds = time.perf_counter() - start
    order: dict[int, None] = {}
    for r in results:
        index = rec.space.index({k: r[k] for k in rec.space.names})
        if index is not None:
            order.setdefault(index, None)
    indices = np.array(list(order), dtype=np.int64)[: base.budget]
    result = score_run(seed, rec.times[indices], indices, base, base.budget)
    return result.score, result.trials_to[TO_95], seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spaces", nargs="+", type=Path)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--ours", default=",".join(OURS))
    parser.add_argument("--kt", default=",".join(KERNEL_TUNER))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write every seed's result here")
    args = parser.parse_args()
    ours = [s for s in args.ours.split(",") if s]
    kt = [s for s in args.kt.split(",") if s]

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
            print(
                f"{space.name}: {len(rec.space)} configs ({int(rec.failed.sum())} failed), "
                f"budget {base.budget}",
                file=sys.stderr,
            )
            for seed in range(args.seeds):
                for name in ours:
                    futures[(path, name, seed)] = pool.submit(run_ours, path, name, seed)
                for name in kt:
                    futures[(path, f"kt:{name}", seed)] = pool.submit(
                        run_kernel_tuner, path, str(plain), name, seed
                    )
        for done, _ in enumerate(as_completed(futures.values()), 1):
            if done % 20 == 0 or done == len(futures):
                print(f"{done}/{len(futures)} runs done", file=sys.stderr, flush=True)
        results = {key: f.result() for key, f in futures.items()}

    strategies = ours + [f"kt:{name}" for name in kt]
    print_table(args.spaces, strategies, args.seeds, results)
    print(
        f"\n{args.seeds} seeds; wall time {time.perf_counter() - started:.0f} s with "
        f"{args.jobs} processes; strategy seconds per run (mean over spaces and seeds):"
    )
    for name in strategies:
        secs = [results[(str(s), name, k)][2] for s in args.spaces for k in range(args.seeds)]
        print(f"  {name}: {np.mean(secs):.2f}")
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "space": p,
                        "strategy": n,
                        "seed": k,
                        "score": r[0],
                        "trials_to_95": r[1],
                        "seconds": r[2],
                    }
                    for (p, n, k), r in results.items()
                ],
                indent=1,
            )
        )


def print_table(spaces: list[Path], strategies: list[str], seeds: int, results: dict) -> None:
    """One row per strategy: mean score (median trials to 95 %) per space, and the mean score."""
    names = [s.name.split(".")[0] for s in spaces]
    width = max(len(n) for n in names + ["x" * 16])
    print(f"\n{'strategy':22s}" + "".join(f"{n:>{width + 2}s}" for n in names) + f"{'mean':>8s}")
    for strategy in strategies:
        cells, means = [], []
        for space in spaces:
            runs = [results[(str(space), strategy, k)] for k in range(seeds)]
            score = float(np.mean([r[0] for r in runs]))
            t95 = np.median([math.inf if r[1] is None else r[1] for r in runs])
            budget = _recording(str(space))[1].budget
            reach = f">{budget}" if math.isinf(t95) else f"{t95:g}"
            cells.append(f"{score:.3f} ({reach})")
            means.append(score)
        print(
            f"{strategy:22s}"
            + "".join(f"{c:>{width + 2}s}" for c in cells)
            + f"{np.mean(means):8.3f}"
        )


if __name__ == "__main__":
    main()
