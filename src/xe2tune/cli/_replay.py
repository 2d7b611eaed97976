"""``xe2tune replay``: judge a search strategy offline on a recorded, brute-forced space."""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import typer
from rich.table import Table

from xe2tune.cli._app import app, console, fail
from xe2tune.errors import Xe2TuneError
from xe2tune.tuner import (
    DEFAULT_SAMPLER,
    FRACTIONS,
    SAMPLER_NAMES,
    StrategyReport,
    evaluate,
    load_recording,
    report_points,
)


@app.command()
def replay(
    space: Path = typer.Option(..., "--space", help="Kernel Tuner cache (.json/.json.gz) or T4 file."),
    sampler: str = typer.Option(
        DEFAULT_SAMPLER, "--sampler", help=f"One of: {', '.join(SAMPLER_NAMES)}."
    ),
    budget: int = typer.Option(
        None, "--budget", min=1, help="Trials per run [default: the methodology budget]."
    ),
    seeds: int = typer.Option(10, "--seeds", min=1, help="Runs, with seeds 0..K-1."),
    noise: bool = typer.Option(
        False, "--noise", help="Answer with a recorded raw sample instead of the mean."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Replay a sampler on a recorded space; report best vs optimum, trials to 90/95/99 %, score."""
    if sampler not in SAMPLER_NAMES:
        raise fail(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLER_NAMES)}")
    try:
        recording = load_recording(space)
    except Xe2TuneError as exc:
        raise fail(str(exc)) from None
    size = len(recording.space)
    if budget is not None and budget > size:
        raise fail(f"--budget {budget} is larger than the space ({size} valid configs)")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with console.status(f"replaying {sampler} x {seeds} seeds", disable=as_json):
        report = evaluate(recording, sampler, budget=budget, seeds=range(seeds), noise=noise)
    data = _as_dict(recording.source, recording, report, noise)
    if as_json:
        console.print_json(json.dumps(data))
    else:
        _print(data)


def _as_dict(source: str, recording, report: StrategyReport, noise: bool) -> dict:
    base = report.baseline
    points = report_points(report.budget)
    fractions = [f"{f:.2f}" for f in FRACTIONS]
    names = recording.space.names
    runs = []
    for s in report.seeds:
        best = None if s.best_index is None else dict(zip(names, recording.space.configs[s.best_index]))
        runs.append(
            {
                "seed": s.seed,
                "score": s.score,
                "best_time": float(s.best_so_far[-1]),
                "best_config": best,
                "best_at": [float(s.best_so_far[p - 1]) for p in points],
                "trials_to": dict(zip(fractions, s.trials_to)),
            }
        )
    median_to = {f: report.median_trials_to(v) for f, v in zip(fractions, FRACTIONS)}
    return {
        "space": source,
        "kernel": recording.kernel_name,
        "device": recording.device_name,
        "configs": len(recording.space),
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
            "score_std": float(math.sqrt(sum((r["score"] - report.mean_score) ** 2 for r in runs) / len(runs))),
            "best_at_mean": [float(v) for v in report.mean_best_at(points)],
            "trials_to_median": {f: (None if math.isinf(v) else v) for f, v in median_to.items()},
        },
    }


def _print(data: dict) -> None:
    opt = data["optimum"]
    console.print(
        f"{data['kernel']} on {data['device']}: {data['configs']} valid configs "
        f"({data['failed']} failed), optimum {opt:.4g} ms; methodology budget "
        f"{data['methodology_budget']}; sampler [bold]{data['sampler']}[/], budget {data['budget']}"
        + (", noisy answers" if data["noise"] else "")
    )
    points = Table(title="best found (% of optimum performance) at each budget point")
    points.add_column("trials", justify="right")
    points.add_column("random search (expected)", justify="right")
    points.add_column(f"{data['sampler']} (mean of seeds)", justify="right")
    for p, r, b in zip(data["budget_points"], data["random_expected_best"], data["aggregate"]["best_at_mean"]):
        points.add_row(str(p), f"{100 * opt / r:.1f} %", f"{100 * opt / b:.1f} %")
    console.print(points)
    runs = Table(title="per seed")
    for column in ("seed", "score", "best (ms)", "to 90 %", "to 95 %", "to 99 %"):
        runs.add_column(column, justify="right")
    for r in data["runs"]:
        runs.add_row(
            str(r["seed"]), f"{r['score']:.3f}", f"{r['best_time']:.4g}",
            *(_trials(v) for v in r["trials_to"].values()),
        )
    agg = data["aggregate"]
    runs.add_row(
        "all", f"{agg['score_mean']:.3f} ± {agg['score_std']:.3f}", "",
        *(_trials(v) for v in agg["trials_to_median"].values()), style="bold",
    )
    console.print(runs)
    console.print("score: 0 = random search without replacement, 1 = optimum found at once; "
                  "'all' row: mean score, median trials")


def _trials(value: float | None) -> str:
    return "not reached" if value is None else f"{value:g}"
