"""``xe2tune bench``: build, verify and measure one config of one problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from xe2tune.cli._app import app, console, fail
from xe2tune.cli._devices import DbOption, DeviceOption, JsonOption
from xe2tune.cli._isa_view import compiler_missing, ocloc_device
from xe2tune.cli._problem_options import (
    MAX_EXTENT,
    HeadDimOption,
    HeadDimVOption,
    KvDtypeOption,
)
from xe2tune.cli._problem_text import head_words
from xe2tune.cli._vocabulary import seed_vocabulary
from xe2tune.errors import InvalidConfig, InvalidProblem
from xe2tune.kernels import LauncherConfig, ProblemSpec, catalog_device
from xe2tune.measurement import TrialResult, TrialStatus

if TYPE_CHECKING:
    from xe2tune.kernels import LaunchPlan


def problem_from_options(
    *, head_dim: int, dtype: str, seq: int | None, q_len: int | None, kv_len: int | None,
    mode: str | None, causal: bool, heads_q: int, heads_kv: int, batch: int,
    head_dim_v: int | None = None, kv_dtype: str | None = None,
) -> ProblemSpec:
    """The ProblemSpec that the common CLI options describe.

    ``--seq N`` means q_len = kv_len = N for prefill and kv_len = N with one query for decode.

    Raises:
        InvalidProblem: for contradictory or out-of-range options.
    """
    if seq is None and kv_len is None:
        raise InvalidProblem("give --seq N, or --q-len N with --kv-len M")
    if seq is not None and (q_len is not None or kv_len is not None):
        raise InvalidProblem("--seq cannot be combined with --q-len/--kv-len")
    if mode is None:
        mode = "decode" if seq is None and q_len is not None and q_len <= 16 else "prefill"
    if seq is not None:
        q_len, kv_len = (1, seq) if mode == "decode" else (seq, seq)
    q_len = q_len if q_len is not None else (1 if mode == "decode" else kv_len)
    return ProblemSpec(
        mode=mode, head_dim=head_dim, dtype=dtype, q_len=q_len, kv_len=kv_len,
        heads_q=heads_q, heads_kv=heads_kv, batch=batch, causal=causal, head_dim_v=head_dim_v,
        kv_dtype=kv_dtype,
    )


def parse_config(text: str, family: str) -> LauncherConfig:
    """A config from inline JSON or a JSON file path; ``family`` when the JSON names none.

    Raises:
        InvalidConfig: for unreadable files, malformed JSON or wrong fields.
    """
    source = "--config"
    if not text.lstrip().startswith("{"):  # not inline JSON: a file
        path, source = Path(text), f"--config {text}"
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise InvalidConfig(f"{source}: no such file; accepted: a JSON object or the path "
                                "of a JSON file") from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not a text file"
            raise InvalidConfig(f"{source}: cannot read it ({reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidConfig(f"{source} is not valid JSON ({exc.msg} at char {exc.pos}); "
                            "accepted: a JSON object or the path of a JSON file") from None
    return LauncherConfig.from_dict(data, family=family)


def _print_result(result: TrialResult, problem: ProblemSpec) -> None:
    table = Table(title=f"{problem.mode} {head_words(problem)} "
                  f"q={problem.q_len} kv={problem.kv_len} heads {problem.heads_q}/"
                  f"{problem.heads_kv} batch {problem.batch} causal={problem.causal}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    t, r, c = result.timing, result.roofline, result.correctness
    rows = [("status", result.status.value)]
    if c is not None:
        rows += [("correct", str(c.passed)), ("non-finite", str(c.nonfinite)),
                 ("max abs error", f"{c.max_abs_error:.3g}"),
                 ("rel L2 error", f"{c.rel_l2_error:.3g}")]
    if t is not None:
        rows += [("median", f"{t.median * 1e3:.4g} ms"), ("min", f"{t.min * 1e3:.4g} ms"),
                 ("max", f"{t.max * 1e3:.4g} ms"), ("mean", f"{t.mean * 1e3:.4g} ms"),
                 ("p10 / p90", f"{t.p10 * 1e3:.4g} / {t.p90 * 1e3:.4g} ms"),
                 ("CV", f"{t.cv:.2%}"), ("warm-up / iterations / N_BUF",
                                          f"{t.warmup} / {t.iterations} / {t.n_buf}"),
                 ("host overhead / launch", f"{t.host_overhead_s * 1e6:.1f} us")]
    if r is not None:
        rows += [("TFLOP/s", f"{r.tflops:.4g}"), ("GB/s", f"{r.gbps:.4g}"),
                 ("arithmetic intensity", f"{r.arithmetic_intensity:.1f} FLOP/B"),
                 ("roofline fraction", f"{r.roofline_fraction:.3f} ({r.peak_source} peaks)")]
    rows += [("build", f"{result.build_s:.2f} s")]
    if result.error:
        rows.append(("error", result.error.splitlines()[0]))
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)
    # below the table, wrapped: in a cell the config would make the table as wide as itself
    console.print(f"config: {seed_vocabulary(result.config)}", highlight=False)


@app.command()
def bench(
    head_dim: HeadDimOption,
    dtype: Annotated[str, typer.Option(help="fp16, bf16 or fp32")] = "fp16",
    head_dim_v: HeadDimVOption = None,
    kv_dtype: KvDtypeOption = None,
    seq: Annotated[int | None, typer.Option(
        min=1, max=MAX_EXTENT,
        help="sequence length (kv length for decode); this or --kv-len")] = None,
    q_len: Annotated[int | None, typer.Option("--q-len", min=1, max=MAX_EXTENT)] = None,
    kv_len: Annotated[int | None, typer.Option("--kv-len", min=1, max=MAX_EXTENT)] = None,
    mode: Annotated[str | None, typer.Option(help="prefill or decode")] = None,
    causal: Annotated[bool, typer.Option("--causal/--no-causal")] = False,
    heads_q: Annotated[int, typer.Option("--heads-q", min=1, max=MAX_EXTENT)] = 8,
    heads_kv: Annotated[int, typer.Option("--heads-kv", min=1, max=MAX_EXTENT)] = 8,
    batch: Annotated[int, typer.Option(min=1, max=MAX_EXTENT)] = 1,
    config: Annotated[str | None, typer.Option(help="LauncherConfig as JSON or a file")] = None,
    warmup: Annotated[int, typer.Option()] = 20,
    iters: Annotated[int, typer.Option(help="timed iterations, 1..1000")] = 100,
    nbuf: Annotated[int, typer.Option(help="rotated buffer sets (cache busting)")] = 4,
    time_budget: Annotated[float, typer.Option(help="seconds for the timed part")] = 5.0,
    device: DeviceOption = None,
    isa_target: Annotated[str | None, typer.Option(
        "--isa-target",
        help="also compile the config with Intel's Xe2 compiler for this catalog GPU (e.g. "
             "b580, 140v) and report its ISA (--json: under \"isa\"); the timing is the live "
             "device's, the ISA is the named GPU's (compiled only, never run there)")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build a config (the family's default when none is given), check it, and time it."""
    problem = problem_from_options(
        head_dim=head_dim, dtype=dtype, seq=seq, q_len=q_len, kv_len=kv_len, mode=mode,
        causal=causal, heads_q=heads_q, heads_kv=heads_kv, batch=batch, head_dim_v=head_dim_v,
        kv_dtype=kv_dtype,
    )
    from xe2tune.harness import BenchSettings, MeasureRequest, problem_unfit_reason
    from xe2tune.kernels import family_for, family_for_mode  # the families: NumPy loads

    try:
        settings = BenchSettings(warmup=warmup, iterations=iters, n_buf=nbuf,
                                 time_budget_s=time_budget)
    except ValueError as exc:
        raise InvalidProblem(str(exc)) from None
    isa_device = ocloc_device(isa_target) if isa_target is not None else None
    if isa_device is not None and (missing := compiler_missing()) is not None:
        raise fail(f"--isa-target: {missing}")
    launcher = parse_config(config, family_for_mode(problem.mode).name) if config else None
    from xe2tune.cli._session import open_runner, open_session
    from xe2tune.db import open_store

    store = open_store(db)
    session = open_session(device, store, quiet=as_json)
    store.close()
    family = family_for(problem, session.caps, launcher.family if launcher else None)
    launcher = launcher or family.default_config(problem, session.caps)
    reason = family.invalid_reason(launcher, problem, session.caps)
    if reason is not None:
        raise InvalidConfig(f"invalid config: {reason}")
    unfit = problem_unfit_reason(problem, session.caps, n_buf=settings.n_buf)
    if unfit is not None:
        raise InvalidProblem(unfit)
    runner = open_runner(session, settings)  # a hung or crashing config cannot hang bench
    try:
        result = runner.measure(MeasureRequest(family, problem, launcher))
    finally:
        runner.close()
    # The ISA is of the build the named GPU would run: the same config planned for that GPU's
    # description (its kernel policy and register mode), not the live device's build.
    isa_plan: LaunchPlan | str | None = None
    if isa_target is not None:
        target_caps = catalog_device(isa_target).caps
        target_reason = family.invalid_reason(launcher, problem, target_caps)
        isa_plan = (f"the config is not valid on {isa_target}: {target_reason}" if target_reason
                    else family.plan(launcher, problem, target_caps))
    from xe2tune.cli._inspect import bench_spirv, print_bench_isa  # _inspect imports this

    if as_json:
        out = result.to_dict()
        out.update(problem=problem.to_dict(), family=family.name,
                   device=session.listing.filter_string, device_name=session.caps.name)
        out.update(bench_spirv(family.plan(launcher, problem, session.caps), isa_plan,
                               isa_device))
        print(json.dumps(out, indent=2))
    else:
        _print_result(result, problem)
        if isa_plan is not None and isa_device is not None:
            print_bench_isa(isa_plan, isa_device)
    if result.status is not TrialStatus.OK:
        raise typer.Exit(1)
