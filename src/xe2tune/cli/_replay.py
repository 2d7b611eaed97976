"""``xe2tune replay``: judge a search strategy offline on a recorded, brute-forced space."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import MofNCompleteColumn, Progress
from rich.table import Table

from xe2tune import config
from xe2tune.cli._app import app, console, fail
from xe2tune.errors import Xe2TuneError

if TYPE_CHECKING:
    from xe2tune.tuner import Recording, StrategyReport

SAMPLER_HELP = "search strategy (default: gp-portfolio; a wrong name lists them all)"


@app.command()
def replay(
    space: Annotated[
        Path, typer.Option("--space", help="Kernel Tuner cache (.json, .json.gz) or T4 file")
    ],
    # the names live in the tuner, which loads only when a command runs (not for --help)
    sampler: Annotated[str | None, typer.Option(help=SAMPLER_HELP)] = None,
    budget: Annotated[
        int | None, typer.Option(min=1, help="trials per run [default: the trial-count budget]")
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, help="runs, with seeds 0..K-1")] = 10,
    noise: Annotated[
        bool, typer.Option("--noise", help="answer with a recorded raw sample, not the mean")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Replay a sampler on a recorded space: best vs optimum, trials to 90/95/99 %, score."""
    from xe2tune.tuner import DEFAULT_SAMPLER, SAMPLER_NAMES

    sampler = sampler or DEFAULT_SAMPLER
    if sampler not in SAMPLER_NAMES:
        raise fail(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLER_NAMES)}")
    import optuna  # optuna and the replay's modules after the checks the arguments alone allow

    from xe2tune.tuner import load_recording
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
    """``tuner.evaluate`` with a live count of the trials replayed.

    Model-based samplers slow down as their trials accumulate, so a replay of a whole space
    can take hours; runs last until both scores' budgets are spent, so the total is not known
    up front.
    """
    from xe2tune.tuner import evaluate

    columns = (*Progress.get_default_columns()[:1], MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True, disable=quiet) as bar:
        task = bar.add_task(f"replaying {sampler}, {seeds} seeds", total=None)
        return evaluate(recording, sampler, budget=budget, seeds=range(seeds), noise=noise,
                        progress=lambda: bar.advance(task))


def report_dict(recording: Recording, report: StrategyReport, noise: bool) -> dict[str, Any]:
    """The replay report as plain data (what ``--json`` prints)."""
    from xe2tune.tuner import FRACTIONS, report_points

    base = report.baseline
    points = report_points(report.budget)
    keys = [f"{f:.2f}" for f in FRACTIONS]
    space = recording.space
    runs = [
        {
            "seed": s.seed,
            "trial_count_score": s.score,
            "best_time": float(s.best_so_far[-1]),
            "best_config": None if s.best_index is None else space.config(s.best_index),
            "best_at": [float(s.best_so_far[p - 1]) for p in points],
            "trials_to": dict(zip(keys, s.trials_to, strict=True)),
            "simulated_seconds": None if s.trace is None else float(s.trace.elapsed[-1]),
        }
        for s in report.seeds
    ]
    median_to = [report.median_trials_to(f) for f in FRACTIONS]
    try:
        scored, note = report.methodology(), None
    except ValueError as exc:
        scored, note = None, str(exc)
    if scored is None and note is None:
        note = "the file records no compile, run or framework times"
    return {
        "space": recording.source,
        "kernel": recording.kernel_name,
        "device": recording.device_name,
        "configs": len(space),
        "failed": int(recording.failed.sum()),
        "optimum": base.optimum,
        "median": base.median,
        "trial_budget": base.budget,
        "methodology_seconds": None if report.time is None else [
            float(report.time.time_range[0]), float(report.time.time_range[-1])],
        "sampler": report.strategy,
        "budget": report.budget,
        "noise": noise,
        "budget_points": points,
        "random_expected_best": [float(base.expected_best[p - 1]) for p in points],
        "runs": runs,
        "aggregate": {
            "methodology_score": None if scored is None else scored[0],
            "methodology_error": None if scored is None else scored[1],
            "methodology_note": note,
            "trial_count_score": report.mean_score,
            "trial_count_error": _finite(report.score_error),
            "best_at_mean": [float(v) for v in report.mean_best_at(points)],
            "trials_to_median": {
                k: None if math.isinf(v) else v for k, v in zip(keys, median_to, strict=True)
            },
        },
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _print(data: dict[str, Any]) -> None:
    opt = data["optimum"]
    seconds = data["methodology_seconds"]
    console.print(
        f"{data['kernel']} on {data['device']}: {data['configs']} valid configs "
        f"({data['failed']} failed), optimum {opt:.4g} ms, trial budget {data['trial_budget']}"
        + (f", methodology time range {seconds[0]:.4g}..{seconds[1]:.4g} s" if seconds else "")
        + f"; sampler [bold]{data['sampler']}[/], budget {data['budget']} trials"
        + (", noisy answers" if data["noise"] else "")
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
    runs = Table(title="per seed (last row: mean and standard error, median trials)")
    for column in ("seed", "trial-count score", "best (ms)", "to 90 %", "to 95 %", "to 99 %"):
        runs.add_column(column, justify="right")
    for r in data["runs"]:
        runs.add_row(
            str(r["seed"]),
            f"{r['trial_count_score']:.3f}",
            f"{r['best_time']:.4g}",
            *(_trials(v) for v in r["trials_to"].values()),
        )
    agg = data["aggregate"]
    runs.add_row(
        "all",
        f"{agg['trial_count_score']:.3f} ± {_error(agg['trial_count_error'])}",
        "",
        *(_trials(v) for v in agg["trials_to_median"].values()),
        style="bold",
    )
    console.print(runs)
    if agg["methodology_score"] is None:
        console.print(f"methodology score: n/a ({agg['methodology_note']})")
    else:
        console.print(
            f"[bold]methodology score[/] (simulated tuning time, runs pooled): "
            f"{agg['methodology_score']:.3f} ± {_error(agg['methodology_error'])}"
        )
    console.print(
        f"[bold]trial-count score[/]: {agg['trial_count_score']:.3f} ± "
        f"{_error(agg['trial_count_error'])}"
    )
    console.print(
        "scores: 0 = as good as random search, 1 = optimum found from the first scored point on; "
        "± = standard error over seeds"
    )


def _error(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _trials(value: float | None) -> str:
    return "not reached" if value is None else f"{value:g}"
