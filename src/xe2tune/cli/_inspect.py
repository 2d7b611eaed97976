"""``xe2tune inspect``: the SPIR-V one config builds to, summarized (and ``bench --json``'s copy).

Per kernel: the required subgroup size, the register mode, matrix multiply-accumulates and
static local memory, read from the SPIR-V the SYCL runtime compiles the config to. ``--target``
validates and plans for a catalog GPU that is not here (its description only changes the
defines; the build runs on the embedded CPU device). ``--ocloc-target`` adds what Intel's offline
compiler makes of the modules for a GPU it knows, labelled with that GPU.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from xe2tune.cli._app import app, console, fail
from xe2tune.cli._bench import parse_config, problem_from_options
from xe2tune.cli._devices import DeviceOption, JsonOption
from xe2tune.cli._vocabulary import seed_vocabulary
from xe2tune.errors import InvalidConfig, Xe2TuneError
from xe2tune.kernels import (
    LaunchPlan,
    OclocReport,
    SpirvCapture,
    capture_spirv,
    catalog_device,
    define_flags,
    family_for,
    family_for_mode,
    ocloc_compile,
    ocloc_path,
)

# A capture may build twice (the second time under the CPU runtime's slow vectorizer mode 0:
# a prefill config took 130 s on 2 loaded cores).
CAPTURE_TIMEOUT_S = 600.0


def bench_spirv(plan: LaunchPlan) -> dict[str, Any]:
    """The SPIR-V summary ``bench --json`` reports; a capture that fails is reported in it.

    The bench has already built and measured the config, so a failed capture (a timeout, say)
    must not cost its result.
    """
    try:
        return capture_spirv(plan, timeout_s=CAPTURE_TIMEOUT_S).to_dict()
    except Xe2TuneError as exc:
        return {"error": (str(exc).splitlines() or [type(exc).__name__])[0]}


def _print(capture: SpirvCapture, ocloc: list[OclocReport], head: str, config: str,
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
    for report in ocloc:
        console.print(f"ocloc ({', '.join(report.kernels)}): {report.text()}", highlight=False,
                      markup=False)


@app.command()
def inspect(
    head_dim: Annotated[int, typer.Option("--head-dim", help="64, 96, 128, 192 or 256")],
    dtype: Annotated[str, typer.Option(help="fp16, bf16 or fp32")] = "fp16",
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
    ocloc_target: Annotated[str | None, typer.Option(
        "--ocloc-target", help="also compile with ocloc for this GPU, e.g. dg2 or pvc")] = None,
    timeout: Annotated[float, typer.Option(help="seconds the capture may take")] = (
        CAPTURE_TIMEOUT_S),
    as_json: JsonOption = False,
) -> None:
    """Build a config (the family's default when none is given) and summarize its SPIR-V."""
    problem = problem_from_options(
        head_dim=head_dim, dtype=dtype, seq=seq, q_len=q_len, kv_len=kv_len, mode=mode,
        causal=causal, heads_q=heads_q, heads_kv=heads_kv, batch=batch,
    )
    if target is not None and device is not None:
        raise fail("--target (a catalog GPU) and --device (a live one) exclude each other")
    if ocloc_target is not None and ocloc_path() is None:
        raise fail("--ocloc-target needs ocloc on PATH (Debian: apt-get install "
                   "intel-opencl-icd)")
    if target is not None:
        caps, where = catalog_device(target).caps, target
    else:
        from xe2tune.harness import device_caps, resolve_device  # a live device: dpctl loads

        live = resolve_device(device)
        caps, where = device_caps(live), device or live.filter_string
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
    ocloc = [ocloc_compile(image, module, target=ocloc_target, timeout_s=timeout)
             for image, module in zip(capture.images, capture.modules, strict=True)
             ] if ocloc_target else []
    defines = define_flags(plan.defines)
    if as_json:
        print(json.dumps({
            "problem": problem.to_dict(), "family": chosen.name, "config": launcher.to_dict(),
            "device": where, "device_name": caps.name, "catalog_target": target is not None,
            "defines": defines, "spirv": capture.to_dict(),
            "ocloc": [r.to_dict() for r in ocloc] if ocloc_target else None,
        }, indent=2))
        return
    p = problem
    head = (f"[bold]{chosen.name}[/] for {where} ({caps.name}): {p.mode} D={p.head_dim} "
            f"{p.dtype} q={p.q_len} kv={p.kv_len} heads {p.heads_q}/{p.heads_kv} batch "
            f"{p.batch} causal={p.causal}")
    _print(capture, ocloc, head, seed_vocabulary(launcher), defines)
