"""``xe2tune inspect``: the SPIR-V one config builds to, summarized (and ``bench --json``'s copy).

Per kernel: the required subgroup size, the register mode, matrix multiply-accumulates and
static local memory, read from the SPIR-V the SYCL runtime compiles the config to. ``--target``
validates and plans for a catalog GPU that is not here (its description only changes the
defines; the build runs on the embedded CPU device). ``--isa`` adds what Intel's Xe2 compiler
makes of the modules for that GPU (registers, occupancy, spills, instruction counts per kernel),
labelled with the GPU; the GPU is never run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from xe2tune.cli._app import app, console, fail
from xe2tune.cli._bench import parse_config, problem_from_options
from xe2tune.cli._devices import DeviceOption, JsonOption
from xe2tune.cli._isa_view import capture_isa, compiler_missing, print_isa
from xe2tune.cli._problem_options import HeadDimOption, HeadDimVOption, KvDtypeOption
from xe2tune.cli._problem_text import head_words
from xe2tune.cli._vocabulary import seed_vocabulary
from xe2tune.errors import InvalidConfig, Xe2TuneError
from xe2tune.kernels import catalog_device

if TYPE_CHECKING:
    from xe2tune.kernels import LaunchPlan, ModuleIsa, SpirvCapture

# A capture may build twice (the second time under the CPU runtime's slow vectorizer mode 0:
# a prefill config took 130 s on 2 loaded cores).
CAPTURE_TIMEOUT_S = 600.0


def _first_line(exc: Xe2TuneError) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def bench_spirv(plan: LaunchPlan, isa_plan: LaunchPlan | str | None,
                isa_device: str | None) -> dict[str, Any]:
    """The SPIR-V summary ``bench --json`` reports (``"spirv"``, the live device's build), and
    with ``isa_device`` the ISA of ``isa_plan`` for that GPU (``"isa"``; a string is why there
    is none).

    The bench has already built and measured the config, so a failed capture (a timeout, say)
    or a missing compiler is reported in the result, never costs it.
    """
    from xe2tune.kernels import capture_spirv

    try:
        out: dict[str, Any] = {"spirv": capture_spirv(plan, timeout_s=CAPTURE_TIMEOUT_S).to_dict()}
    except Xe2TuneError as exc:
        out = {"spirv": {"error": _first_line(exc)}}
    if isa_device is not None and isa_plan is not None:
        out["isa"] = _isa_of(isa_plan, isa_device)
    return out


def _bench_isa(plan: LaunchPlan | str, isa_device: str) -> list[ModuleIsa] | str:
    """The ISA of the bench's config planned for the named GPU, or why there is none."""
    if isinstance(plan, str):
        return plan
    missing = compiler_missing()
    if missing:
        return missing
    from xe2tune.kernels import capture_spirv

    try:
        capture = capture_spirv(plan, timeout_s=CAPTURE_TIMEOUT_S)
    except Xe2TuneError as exc:
        return f"no SPIR-V: {_first_line(exc)}"
    return capture_isa(capture, isa_device)


def _isa_of(plan: LaunchPlan | str, isa_device: str) -> dict[str, Any]:
    isa = _bench_isa(plan, isa_device)
    if isinstance(isa, str):
        return {"error": isa}
    return {"target": isa_device, "modules": [m.to_dict() for m in isa]}


def print_bench_isa(plan: LaunchPlan | str, isa_device: str) -> None:
    """``bench --isa-target`` without ``--json``: the ISA table, or why there is none."""
    isa = _bench_isa(plan, isa_device)
    if isinstance(isa, str):
        console.print(f"ISA: {isa}", highlight=False, markup=False)
        return
    print_isa(isa, f"ISA for {isa_device} (compiled only, never run there)")


def _print(capture: SpirvCapture, isa: list[ModuleIsa], head: str, config: str,
           defines: list[str]) -> None:
    console.print(head, highlight=False)
    console.print(f"config: {config}", highlight=False, markup=False)
    console.print(f"defines: {' '.join(defines)}", highlight=False, markup=False)
    table = Table(title=f"SPIR-V: {len(capture.modules)} module(s), built in "
                  f"{capture.build_seconds:.1f} s (capture {capture.capture_seconds:.1f} s)")
    for column in ("kernel", "subgroup", "registers", "matrix MADs", "local memory"):
        table.add_column(column, justify="left" if column == "kernel" else "right")
    for k in capture.kernels:
        table.add_row(k.kernel, str(k.subgroup_size or "any"), k.register_mode,
                      str(k.matrix_mads), f"{k.local_memory_bytes} B")
    console.print(table)
    summary = capture.summary_dict()
    console.print(f"extensions: {', '.join(summary['extensions']) or '-'}", highlight=False)
    if isa:
        print_isa(isa, f"ISA for {isa[0].target} (compiled only, never run)")


@app.command()
def inspect(
    head_dim: HeadDimOption,
    dtype: Annotated[str, typer.Option(help="fp16, bf16 or fp32")] = "fp16",
    head_dim_v: HeadDimVOption = None,
    kv_dtype: KvDtypeOption = None,
    seq: Annotated[int | None, typer.Option(help="sequence length (kv length for decode)")] = None,
    q_len: Annotated[int | None, typer.Option("--q-len")] = None,
    kv_len: Annotated[int | None, typer.Option("--kv-len")] = None,
    mode: Annotated[str | None, typer.Option(help="prefill or decode")] = None,
    causal: Annotated[bool, typer.Option("--causal/--no-causal")] = False,
    heads_q: Annotated[int, typer.Option("--heads-q")] = 8,
    heads_kv: Annotated[int, typer.Option("--heads-kv")] = 8,
    batch: Annotated[int, typer.Option()] = 1,
    config: Annotated[str | None, typer.Option(help="LauncherConfig as JSON or a file")] = None,
    family: Annotated[str | None, typer.Option(help="kernel family (default: the device's "
                                                    "preferred one)")] = None,
    target: Annotated[str | None, typer.Option(
        help="catalog GPU to plan for instead of the live device, e.g. b580")] = None,
    device: DeviceOption = None,
    isa: Annotated[bool, typer.Option(
        "--isa", help="also compile the SPIR-V with Intel's Xe2 compiler for the --target GPU "
                      "(or the live one) and report each kernel's ISA: registers, threads per "
                      "EU, spills, DPAS and 2D block messages")] = False,
    timeout: Annotated[float, typer.Option(help="seconds the capture may take")] = (
        CAPTURE_TIMEOUT_S),
    as_json: JsonOption = False,
) -> None:
    """Build a config (the family's default when none is given) and summarize its SPIR-V."""
    problem = problem_from_options(
        head_dim=head_dim, dtype=dtype, seq=seq, q_len=q_len, kv_len=kv_len, mode=mode,
        causal=causal, heads_q=heads_q, heads_kv=heads_kv, batch=batch, head_dim_v=head_dim_v,
        kv_dtype=kv_dtype,
    )
    if target is not None and device is not None:
        raise fail("--target (a catalog GPU) and --device (a live one) exclude each other")
    if isa and (missing := compiler_missing()) is not None:
        raise fail(f"--isa: {missing}")
    if target is not None:
        description = catalog_device(target)
        caps, where = description.caps, target
    else:
        from xe2tune.harness import device_caps, resolve_device  # a live device: dpctl loads

        live = resolve_device(device)
        caps, where = device_caps(live), device or live.filter_string
        from xe2tune.kernels import describe_live_device

        description = describe_live_device(caps.name)
    if isa and description is None:
        raise fail(f"--isa: {caps.name} is no catalog GPU; name one with --target (e.g. b580, "
                   "b570, 140v)")
    from xe2tune.kernels import (  # the families (NumPy) and the SPIR-V capture load here
        capture_spirv,
        define_flags,
        family_for,
        family_for_mode,
    )

    launcher = parse_config(config, family or family_for_mode(problem.mode).name) \
        if config else None
    chosen = family_for(problem, caps, family or (launcher.family if launcher else None))
    launcher = launcher or chosen.default_config(problem, caps)
    if launcher.family != chosen.name:
        raise InvalidConfig(f"--config is a {launcher.family} config; --family is {chosen.name}")
    reason = chosen.invalid_reason(launcher, problem, caps)
    if reason is not None:
        raise InvalidConfig(f"invalid config: {reason}")
    plan = chosen.plan(launcher, problem, caps)
    capture = capture_spirv(plan, timeout_s=timeout)
    reports = capture_isa(capture, description.ocloc_device) if isa and description else []
    defines = define_flags(plan.defines)
    if as_json:
        print(json.dumps({
            "problem": problem.to_dict(), "family": chosen.name, "config": launcher.to_dict(),
            "device": where, "device_name": caps.name, "catalog_target": target is not None,
            "defines": defines, "spirv": capture.to_dict(),
            "isa": {"target": description.ocloc_device,
                    "modules": [m.to_dict() for m in reports]} if isa and description else None,
        }, indent=2))
        return
    p = problem
    head = (f"[bold]{chosen.name}[/] for {where} ({caps.name}): {p.mode} {head_words(p)} "
            f"q={p.q_len} kv={p.kv_len} heads {p.heads_q}/{p.heads_kv} batch "
            f"{p.batch} causal={p.causal}")
    _print(capture, reports, head, seed_vocabulary(launcher), defines)
