"""``xe2tune search``: tune launcher configs per problem and store the best ones."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated

import typer
from rich.live import Live
from rich.table import Table

from xe2tune.cli._app import app, console, err_console, fail
from xe2tune.cli._devices import DeviceOption, JsonOption
from xe2tune.cli._problem_options import (
    CONFIRM_ROUNDS,
    CPU_BENCH_BUDGET_S,
    CPU_TIMEOUT_S,
    CPU_TRIALS,
    GPU_BENCH_BUDGET_S,
    GPU_TRIALS,
    BatchOption,
    CausalOption,
    DtypeOption,
    HeadDimOption,
    HeadDimVOption,
    HeadsKvOption,
    HeadsQOption,
    KvDtypeOption,
    ModeOption,
    SeqOption,
    problem_overrides,
)
from xe2tune.cli._problem_text import dtype_words, head_words
from xe2tune.cli._replay import SAMPLER_HELP
from xe2tune.cli._stop import StopOnSignal
from xe2tune.cli._table import Column, print_table
from xe2tune.cli._vocabulary import seed_vocabulary
from xe2tune.errors import InvalidProblem
from xe2tune.kernels import ProblemSpec, catalog_device

if TYPE_CHECKING:
    from xe2tune.tuner import StudyProgress, TuneBudget


def _fmt_ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds is not None else "-"


def _clock(seconds: float) -> str:
    """Seconds as h:mm:ss or m:ss."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class RunClock:
    """Elapsed time and the estimated time left of the whole run (every study, not one).

    The estimate is the run's own pace (wall seconds per finished trial so far, confirmation
    rounds and study setup included) times the trials still due: the rest of this study's
    budget (or of its space, when smaller; the trial in flight included) and the full budget of
    every study not started yet; a run with ``--timeout`` ends by then at the latest. Until a
    study has been confirmed the pace does not contain a confirmation round yet.
    """

    def __init__(self, studies: int, budget: TuneBudget) -> None:
        self.studies, self.budget = studies, budget
        self.started = time.perf_counter()
        self.finished = 0  # studies done or skipped
        self.finished_trials = 0

    def study_ended(self, p: StudyProgress) -> None:
        self.finished += 1
        self.finished_trials += p.trial_index

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self, p: StudyProgress) -> float | None:
        """Estimated seconds left (None before the first trial gives a pace)."""
        done_here = p.trial_index - (1 if p.phase == "measuring" else 0)
        trials = self.finished_trials + done_here
        if trials == 0:
            return None
        budget_here = min(p.trials_budget, p.space_size or p.trials_budget)
        searching = p.phase in ("starting", "measuring", "measured")
        due_here = max(budget_here - done_here, 0) if searching else 0
        due_later = self.budget.trials * max(self.studies - self.finished - 1, 0)
        left = self.elapsed() / trials * (due_here + due_later)
        if self.budget.timeout_s is not None:
            left = min(left, max(self.budget.timeout_s - self.elapsed(), 0.0))
        return left

    def line(self, p: StudyProgress) -> str:
        left = self.remaining(p)
        return (f"study {min(self.finished + 1, self.studies)} of {self.studies}, "
                f"{_clock(self.elapsed())} elapsed, "
                + ("time left not known yet" if left is None else f"about {_clock(left)} left"))


def _best_key(p: StudyProgress) -> tuple[str, float] | None:
    best = p.best
    if best is None or best.median_s is None:
        return None
    return best.config.config_hash(), best.median_s


class ProgressView:
    """Live rich view of the current study, a line each time a study's best improves (the first
    measured config is the first), and a line per finished study."""

    def __init__(self, quiet: bool, clock: RunClock) -> None:
        self.quiet = quiet
        self.live: Live | None = None
        self.clock = clock
        self._shown_best: tuple[str, float] | None = None

    def __call__(self, p: StudyProgress) -> None:
        if p.phase in ("done", "skipped"):
            self.clock.study_ended(p)
        if self.quiet or self.live is None:
            return
        pr = p.problem
        if p.phase == "skipped":
            console.print(f"skipped {pr.mode} seq {pr.kv_len} causal={pr.causal} "
                          f"{dtype_words(pr)}: "
                          f"{p.skipped}", highlight=False)
            return
        if p.phase == "measured":
            self._print_improved(p)
        if p.phase == "starting":
            self._shown_best = _best_key(p)  # a resumed study's stored best is not news
            console.print(f"study {pr.mode} seq {pr.kv_len} causal={pr.causal} "
                          f"{dtype_words(pr)}: "
                          f"{p.space_size} valid configs of {p.cartesian_size} combinations"
                          + (f"; {p.requeued} trials of a killed search requeued"
                             if p.requeued else ""))
        self.live.update(self._render(p))
        if p.phase == "done":
            console.print(self._summary_line(p))

    def _print_improved(self, p: StudyProgress) -> None:
        best, shown = p.best, _best_key(p)
        if best is None or shown is None or shown == self._shown_best:
            return
        self._shown_best = shown
        pr = p.problem
        console.print(f"best so far {pr.mode} seq {pr.kv_len} causal={pr.causal}: "
                      f"{_fmt_ms(best.median_s)}, {best.tflops or 0:.4g} TFLOP/s, roofline "
                      f"{(best.roofline_fraction or 0):.1%} (trial {p.trial_index} of "
                      f"{p.trials_budget})", highlight=False)

    def _render(self, p: StudyProgress) -> Table:
        pr = p.problem
        t = Table(title=f"{pr.mode} {head_words(pr)} q={pr.q_len} kv={pr.kv_len} "
                  f"heads {pr.heads_q}/{pr.heads_kv} causal={pr.causal}", show_header=False)
        best = p.best
        t.add_row("run", self.clock.line(p))
        t.add_row("this study", f"trial {p.trial_index} of {p.trials_budget} ({p.phase}), "
                  f"{_clock(time.perf_counter() - p.started)} elapsed")
        t.add_row("space", f"{p.space_size} valid of {p.cartesian_size} combinations")
        t.add_row("config", seed_vocabulary(p.config) if p.config else "-")
        t.add_row("best", "-" if best is None else
                  f"{_fmt_ms(best.median_s)}, {best.tflops or 0:.4g} TFLOP/s, roofline "
                  f"{(best.roofline_fraction or 0):.1%}")
        t.add_row("measured / reused / failed", f"{p.measured} / {p.reused} / {p.failed}")
        return t

    @staticmethod
    def _summary_line(p: StudyProgress) -> str:
        pr = p.problem
        return (f"done {pr.mode} seq {pr.kv_len} causal={pr.causal}: best "
                f"{_fmt_ms(p.best.median_s if p.best else None)} after {p.trial_index} trials "
                f"({p.measured} measured, {p.reused} reused, {p.failed} failed)"
                + (f", confirmed side by side in {p.confirmation.rounds} rounds"
                   if p.confirmation else ", NOT confirmed"))


def _final_rows(progresses: list[StudyProgress]) -> list[dict]:
    rows = []
    for p in progresses:
        best, default = p.best, p.default
        speedup = (default.median_s / best.median_s
                   if best and default and best.median_s and default.median_s else None)
        rows.append({
            "problem": p.problem.to_dict(),
            "best_config": best.config.to_dict() if best else None,
            "best_median_s": best.median_s if best else None,
            "tflops": best.tflops if best else None,
            "roofline_fraction": best.roofline_fraction if best else None,
            "default_median_s": default.median_s if default else None,
            "speedup_vs_default": speedup,
            # best, default and speedup come from this many side-by-side rounds (None: they
            # are single trials timed minutes apart, e.g. after a stop)
            "confirmed_rounds": p.confirmation.rounds if p.confirmation else None,
            "skipped": p.skipped, "requeued": p.requeued,
            "trials": p.trial_index, "stored_before": p.stored,
            "measured": p.measured, "reused": p.reused,
            "failed": p.failed, "build_s": p.build_s, "verify_s": p.verify_s,
            "bench_s": p.bench_s, "enumerate_s": p.enumerate_s, "setup_s": p.setup_s,
            "confirm_s": p.confirm_s, "store_s": p.store_s,
        })
    return rows


# Narrow terminals lose the trial counts first, then the default's time, then TFLOP/s; the
# best time, roofline fraction and speedup over the default always stay.
FINAL_COLUMNS = (Column("problem"), Column("best", right=True),
                 Column("TFLOP/s", right=True, drop=1), Column("roofline", right=True),
                 Column("default", right=True, drop=2), Column("speedup", right=True),
                 Column("trials", right=True, drop=3))


def _print_final(rows: list[dict]) -> None:
    cells, configs = [], []
    # heads only when they tell one mode's problems apart (MLA decode: 16 and 128 query heads)
    shapes = {(r["problem"]["mode"], r["problem"]["heads_q"], r["problem"]["heads_kv"])
              for r in rows}
    with_heads = len(shapes) > len({mode for mode, _, _ in shapes})
    for r in rows:
        pr, c = r["problem"], r["best_config"]
        heads = f" h{pr['heads_q']}/{pr['heads_kv']}" if with_heads else ""
        cells.append((
            f"{pr['mode']} {pr['kv_len']}{' causal' if pr['causal'] else ''}{heads} "
            f"{dtype_words(ProblemSpec.from_dict(pr))}",
            _fmt_ms(r["best_median_s"]),
            f"{r['tflops']:.4g}" if r["tflops"] is not None else "-",
            f"{r['roofline_fraction']:.1%}" if r["roofline_fraction"] is not None else "-",
            _fmt_ms(r["default_median_s"]),
            f"{r['speedup_vs_default']:.2f}x" if r["speedup_vs_default"] else "-",
            f"{r['stored_before'] + r['trials']} ({r['measured']} new)",
        ))
        rounds = r["confirmed_rounds"]
        confirmed = (f"confirmed in {rounds} round{'s' if rounds != 1 else ''}" if rounds
                     else "not confirmed")
        if r["skipped"]:
            configs.append(f"skipped: {r['skipped']}")
        else:
            configs.append(f"{seed_vocabulary(c)}; {confirmed}" if c else None)
    print_table(console, "best config per problem", FINAL_COLUMNS, cells, configs)


@app.command()
def search(
    head_dim: HeadDimOption,
    head_dim_v: HeadDimVOption = None,
    kv_dtype: KvDtypeOption = None,
    seq: SeqOption = None,
    mode: ModeOption = None,
    causal: CausalOption = None,
    dtype: DtypeOption = None,
    heads_q: HeadsQOption = None,
    heads_kv: HeadsKvOption = None,
    batch: BatchOption = None,
    sampler: Annotated[str | None, typer.Option(help=SAMPLER_HELP)] = None,
    trials: Annotated[int | None, typer.Option(
        help="trials per problem in this run (default: each study topped up to 14 on a CPU, "
             "64 on a GPU, counting its stored trials)")] = None,
    timeout: Annotated[float | None, typer.Option(help="overall seconds")] = None,
    patience: Annotated[int | None, typer.Option(help="stop a study after K trials "
                                                 "without improvement")] = None,
    seed: Annotated[int | None, typer.Option(help="sampler seed")] = None,
    confirm_rounds: Annotated[int, typer.Option(
        "--confirm-rounds", help="alternating rounds in which each study's fastest configs, "
                                 "default and baselines are re-timed side by side before the "
                                 "best and its speedup are stored")] = CONFIRM_ROUNDS,
    db: Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL")] = None,
    device: DeviceOption = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="no progress output")] = False,
    target: Annotated[str | None, typer.Option(
        help="a catalog device (xe2tune devices --catalog) instead of a live one; needs --dry-run",
    )] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="print the spaces, baselines and build options and build the SPIR-V "
                          "of a sample of configs; run nothing",
    )] = False,
    sample: Annotated[int, typer.Option(help="--dry-run: random valid configs built per family")
                      ] = 2,
) -> None:
    """Search launcher configs for every problem of a head dim and store the best ones."""
    # The arguments are checked first, with the tuner's light modules and the device class
    # alone; the database, the study loop and the device session load after.
    from xe2tune.tuner import (
        DEFAULT_SAMPLER,
        SAMPLER_NAMES,
        ConfirmSettings,
        TuneBudget,
        default_problems,
    )

    sampler = sampler or DEFAULT_SAMPLER
    if sampler not in SAMPLER_NAMES:
        raise fail(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLER_NAMES)}")
    if target is not None and not dry_run:
        raise fail("--target names a device that is not here: it only goes with --dry-run")
    target_caps = catalog_device(target).caps if target is not None else None
    from xe2tune.harness import resolve_device  # the device class: dpctl loads here
    on_gpu = (target_caps.device_type if target_caps else
              resolve_device(device).device_type.name) == "gpu"
    try:
        budget = TuneBudget(
            trials=trials if trials is not None else (GPU_TRIALS if on_gpu else CPU_TRIALS),
            timeout_s=timeout if timeout is not None else (None if on_gpu else CPU_TIMEOUT_S),
            patience=patience,
            # Without --trials the default budget is each study's in total: a search repeated
            # after it finished measures nothing and answers from what is stored.
            top_up=trials is None,
        )
        confirm_with = ConfirmSettings(rounds=confirm_rounds)
    except ValueError as exc:
        raise InvalidProblem(str(exc)) from None
    overrides = problem_overrides(
        seq=seq, mode=mode, causal=causal, dtype=dtype, heads_q=heads_q, heads_kv=heads_kv,
        batch=batch, head_dim_v=head_dim_v, kv_dtype=kv_dtype)
    problems = default_problems(head_dim, on_gpu=on_gpu, overrides=overrides)

    from xe2tune.cli._dry_run import print_dry_run
    from xe2tune.cli._session import open_runner, open_session
    from xe2tune.db import open_store
    from xe2tune.harness import BenchSettings, device_caps
    from xe2tune.tuner import SearchPlan, run_search

    if dry_run:
        print_dry_run(problems, target_caps or device_caps(resolve_device(device)),
                      target=target or device or "the default device", sample=sample,
                      as_json=as_json)
        return
    store = open_store(db)
    session = open_session(device, store, quiet=quiet or as_json)
    settings = BenchSettings(time_budget_s=GPU_BENCH_BUDGET_S if on_gpu else CPU_BENCH_BUDGET_S)
    runner = open_runner(session, settings)
    quiet = quiet or as_json
    if not quiet:
        err_console.print(f"database: {store.url}")
        err_console.print(f"device: {session.listing.filter_string} ({session.caps.name}), "
                          f"peaks: {session.peaks.source}; {len(problems)} problems, "
                          f"sampler {sampler}, {budget.trials} trials each")
    # Ctrl-C or SIGTERM: abandon the trial in flight (its config stays untried and goes back to
    # the queue with the one asked next), skip the confirmation, exit 128 + signal.
    stop = StopOnSignal(runner, notice=lambda: err_console.print(
        "stopping: the current trial is abandoned and stays untried (Ctrl-C again to abort)"))
    view = ProgressView(quiet, RunClock(len(problems), budget))
    started = time.perf_counter()
    try:
        live = None if quiet else Live(console=console, transient=True, refresh_per_second=4)
        with stop, live or nullcontext():
            view.live = live
            progresses = run_search(
                SearchPlan(problems=problems, sampler=sampler, budget=budget, seed=seed,
                           confirm=confirm_with),
                store=store, runner=runner, listing=session.listing, device_id=session.device_id,
                observe=view, should_stop=stop.requested,
            )
    finally:
        runner.close()
        store.close()
    rows = _final_rows(progresses)
    wall = time.perf_counter() - started
    if as_json:
        print(json.dumps({"wall_s": wall, "problems": rows}, indent=2))
    elif not quiet:
        _print_final(rows)
        console.print(f"wall time {wall:.0f} s; builds {sum(r['build_s'] for r in rows):.0f} s, "
                      f"verification {sum(r['verify_s'] for r in rows):.0f} s, measurement "
                      f"{sum(r['bench_s'] for r in rows):.0f} s")
        console.print(f"and enumeration {sum(r['enumerate_s'] for r in rows):.1f} s, study setup "
                      f"{sum(r['setup_s'] for r in rows):.1f} s, confirmation "
                      f"{sum(r['confirm_s'] for r in rows):.1f} s, storage "
                      f"{sum(r['store_s'] for r in rows):.1f} s")
    if stop.requested():
        raise typer.Exit(128 + stop.signum)

