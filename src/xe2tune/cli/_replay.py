"""``xe2tune replay``: judge a search strategy offline on a recorded, brute-forced space."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import optuna
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from xe2tune import config
from xe2tune.cli._app import app, console, fail
from xe2tune.errors import Xe2TuneError
from xe2tune.tuner import (
    DEFAULT_SAMPLER,
    FRACTIONS,
    SAMPLER_NAMES,
    Recording,
    StrategyReport,
    load_recording,
    random_baseline,
    report_points,
    score_run,
)
from xe2tune.tuner import replay as replay_seed


@app.command()
def replay(
    space: Annotated[
        Path, typer.Option("--space", help="Kernel Tuner cache (.json, .json.gz) or T4 file")
    ],
    sampler: Annotated[str, typer.Option(help=f"one of {', '.join(SAMPLER_NAMES)}")] = (
        DEFAULT_SAMPLER
    ),
    budget: Annotated[
        int | None, typer.Option(min=1, help="trials per run [default: methodology budget]")
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, help="runs, with seeds 0..K-1")] = 10,
    noise: Annotated[
        bool, typer.Option("--noise", help="answer with a recorded raw sample, not the mean")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Replay a sampler on a recorded space: best vs optimum, trials to 90/95/99 %, score."""
    if sampler not in SAMPLER_NAMES:
        raise fail(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLER_NAMES)}")
    try:
        recording = load_recording(space, max_bytes=config.replay_max_bytes())
    except (Xe2TuneError, ValueError) as exc:
        raise fail(str(exc)) from None
    size = len(recording.space)
    if budget is not None and budget > size:
        raise fail(f"--budget {budget} is larger than the space ({size} valid configs)")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    report = _evaluate(recording, sampler, budget, seeds, noise=noise, quiet=as_json)
    data = report_dict(recording, report, noise)
    if as_json:
        console.print_json(json.dumps(data))
    else:
        _print(data)


def _evaluate(recording: Recording, sampler: str, budget: int | None, seeds: int, *,
              noise: bool, quiet: bool) -> StrategyReport:
    """``tuner.evaluate`` with a progress bar over every trial of every seed.

    Model-based samplers slow down as their trials accumulate, so a replay of a whole space
    can take hours; the bar shows how far it is and how long it should still take.
    """
    baseline = random_baseline(recording.times, budget)
    budget = baseline.budget if budget is None else budget
    columns = (*Progress.get_default_columns()[:1], BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=quiet) as bar:
        task = bar.add_task(f"replaying {sampler}, {seeds} seeds x {budget} trials",
                            total=seeds * budget)
        results = []
        for seed in range(seeds):
            run = replay_seed(recording, sampler, budget=budget, seed=seed, noise=noise,
                              progress=lambda: bar.advance(task))
            results.append(score_run(seed, run.means, run.indices, baseline, budget))
    return StrategyReport(strategy=sampler, budget=budget, baseline=baseline,
                          seeds=tuple(results))


def report_dict(recording: Recording, report: StrategyReport, noise: bool) -> dict[str, Any]:
    """The replay report as plain data (what ``--json`` prints)."""
    base = report.baseline
    points = report_points(report.budget)
    keys = [f"{f:.2f}" for f in FRACTIONS]
    space = recording.space
    runs = [
        {
            "seed": s.seed,
            "score": s.score,
            "best_time": float(s.best_so_far[-1]),
            "best_config": None if s.best_index is None else space.config(s.best_index),
            "best_at": [float(s.best_so_far[p - 1]) for p in points],
            "trials_to": dict(zip(keys, s.trials_to, strict=True)),
        }
        for s in report.seeds
    ]
    scores = [r["score"] for r in runs]
    median_to = [report.median_trials_to(f) for f in FRACTIONS]
    return {
        "space": recording.source,
        "kernel": recording.kernel_name,
        "device": recording.device_name,
        "configs": len(space),
        "failed": int(recording.failed.sum()),
        "optimum": base.optimum,
        "median": base.median,
        "methodology_budget": base.budget,
        "sampler": report.strategy,
        "budget": report.budget,
        "noise": noise,
        "budget_points": points,
        "random_expected_best": [float(base.expected_best[p - 1]) for p in points],
        "runs": runs,
        "aggregate": {
            "score_mean": report.mean_score,
            "score_std": float(
                math.sqrt(sum((s - report.mean_score) ** 2 for s in scores) / len(scores))
            ),
            "best_at_mean": [float(v) for v in report.mean_best_at(points)],
            "trials_to_median": {
                k: None if math.isinf(v) else v for k, v in zip(keys, median_to, strict=True)
            },
        },
    }


def _print(data: dict[str, Any]) -> None:
    opt = data["optimum"]
    console.print(
        f"{data['kernel']} on {data['device']}: {data['configs']} valid configs "
        f"({data['failed']} failed), optimum {opt:.4g} ms, methodology budget "
        f"{data['methodology_budget']}; sampler [bold]{data['sampler']}[/], budget "
        f"{data['budget']}" + (", noisy answers" if data["noise"] else "")
    )
    points = Table(title="best found, as % of optimum performance, after t trials")
    for column in ("t", "random search (expected)", f"{data['sampler']} (mean over seeds)"):
        points.add_column(column, justify="right")
    rows = zip(
        data["budget_points"],
        data["random_expected_best"],
        data["aggregate"]["best_at_mean"],
        strict=True,
    )
    for t, rand, ours in rows:
        points.add_row(str(t), f"{100 * opt / rand:.1f} %", f"{100 * opt / ours:.1f} %")
    console.print(points)
    runs = Table(title="per seed (last row: mean score, median trials)")
    for column in ("seed", "score", "best (ms)", "to 90 %", "to 95 %", "to 99 %"):
        runs.add_column(column, justify="right")
    for r in data["runs"]:
        runs.add_row(
            str(r["seed"]),
            f"{r['score']:.3f}",
            f"{r['best_time']:.4g}",
            *(_trials(v) for v in r["trials_to"].values()),
        )
    agg = data["aggregate"]
    runs.add_row(
        "all",
        f"{agg['score_mean']:.3f} ± {agg['score_std']:.3f}",
        "",
        *(_trials(v) for v in agg["trials_to_median"].values()),
        style="bold",
    )
    console.print(runs)
    console.print(
        "score: 0 = as good as random search, 1 = optimum found from the first scored trial on"
    )


def _trials(value: float | None) -> str:
    return "not reached" if value is None else f"{value:g}"
