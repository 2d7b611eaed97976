"""``xe2tune search --dry-run``: what a search would explore on a device, without running it.

For each problem: the space (Cartesian combinations vs valid configs, per family), the seeded
baselines with their validity, the default, the build options of the first config; then the
SPIR-V of a sample of the valid configs, built through the same run-time compiler as a real
search (building needs no GPU: a catalog device only changes the defines) and summarized, and,
when Intel's Xe2 compiler is installed, compiled for the catalog GPU (verdict, registers,
threads per EU, spills, DPAS and 2D block loads per kernel; compiled only, never run).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import random
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from xe2tune.cli._app import console
from xe2tune.cli._problem_text import head_words
from xe2tune.cli._vocabulary import seed_vocabulary
from xe2tune.errors import Xe2TuneError
from xe2tune.kernels import (
    DeviceCaps,
    GridConfigs,
    IsaJob,
    KernelFamily,
    KernelIsa,
    LauncherConfig,
    ModuleIsa,
    ProblemSpec,
    Verdict,
    capture_spirv,
    compile_isa,
    define_flags,
    describe_live_device,
    isa_pool,
    locate_xe2_compiler,
    search_family,
)

BUILD_TIMEOUT_S = 300.0


@dataclass
class FamilySpace:
    """One member family's share of a problem's space."""

    family: str
    cartesian: int
    valid: int


@dataclass
class ProblemPlan:
    """What the search would do for one problem."""

    problem: ProblemSpec
    family: str
    spaces: list[FamilySpace] = field(default_factory=list)
    baselines: list[dict[str, Any]] = field(default_factory=list)
    default: LauncherConfig | None = None
    build_options: list[str] = field(default_factory=list)
    unavailable: str | None = None


def _members(family: KernelFamily) -> tuple[KernelFamily, ...]:
    return getattr(family, "members", (family,))


def _cartesian(family: KernelFamily, problem: ProblemSpec) -> int:
    return math.prod(len(v) for v in family.parameter_space(problem).values())


def _space_key(member: KernelFamily, problem: ProblemSpec, caps: DeviceCaps) -> tuple:
    # What the families' spaces and validation read of a problem: its mode, head dims, dtypes
    # and heads, and (through the space itself) the decode rows; never the sequence lengths, batch
    # or mask (tests/cli/test_dry_run.py checks this for every family). Problems that differ only
    # there share one enumeration: a dry run of the default GPU problems enumerates ~300,000
    # candidate configs per problem.
    space = tuple((n, tuple(v)) for n, v in member.parameter_space(problem).items())
    return (member.name, space, problem.mode, problem.head_dim, problem.head_dim_v,
            problem.dtype, problem.kv_dtype, problem.heads_q, problem.heads_kv, caps)


_VALID: dict[tuple, GridConfigs] = {}


def valid_configs(member: KernelFamily, problem: ProblemSpec,
                  caps: DeviceCaps) -> GridConfigs:
    """A member family's valid configs for the problem, enumerated once per space key (each
    config made only when it is sampled)."""
    key = _space_key(member, problem, caps)
    if key not in _VALID:
        _VALID[key] = GridConfigs(member.valid_grid(problem, caps),
                                  functools.partial(member.config_from_params, problem))
    return _VALID[key]


def plan_problem(problem: ProblemSpec, caps: DeviceCaps) -> ProblemPlan:
    """The space, baselines, default and build options of one problem on ``caps``."""
    try:
        family = search_family(problem, caps)
    except Xe2TuneError as exc:
        return ProblemPlan(problem, "-", unavailable=str(exc))
    out = ProblemPlan(problem, family.name)
    for member in _members(family):
        valid = len(valid_configs(member, problem, caps))
        out.spaces.append(FamilySpace(member.name, _cartesian(member, problem), valid))
    for baseline in family.baselines(problem, caps):
        reason = family.invalid_reason(baseline.config, problem, caps)
        out.baselines.append({"label": baseline.label, "config": baseline.config,
                              "valid": reason is None, "reason": reason})
    out.default = family.default_config(problem, caps)
    plan = family.plan(out.default, problem, caps)
    out.build_options = define_flags(plan.defines)
    return out


@dataclass(frozen=True)
class SampleBuild:
    """One sampled config's build: its SPIR-V summary, or why it did not build, and its ISA
    for the GPU (None when not compiled for one)."""

    label: str
    config: LauncherConfig
    summary: dict[str, Any] | None
    expected_mads: int | None
    error: str | None
    seconds: float
    isa: tuple[ModuleIsa, ...] | None = None

    @property
    def isa_kernels(self) -> tuple[KernelIsa, ...]:
        """Every kernel of every compiled module."""
        return tuple(k for m in self.isa or () for k in m.kernels)

    @property
    def isa_verdict(self) -> str | None:
        """The ISA verdict: "compiled" when every module compiled, else the first other one."""
        if self.isa is None:
            return None
        failed = next((m.verdict for m in self.isa if m.verdict is not Verdict.COMPILED),
                      Verdict.COMPILED)
        return failed.value

    @property
    def isa_spill_bytes(self) -> int | None:
        """The largest spill of its kernels (None when not compiled)."""
        spills = [k.spill_bytes for k in self.isa_kernels if k.spill_bytes is not None]
        return max(spills) if spills else None


def _sample_configs(
    problems: Sequence[ProblemSpec], caps: DeviceCaps, per_family: int, seed: int
) -> list[tuple[str, ProblemSpec, KernelFamily, LauncherConfig]]:
    """Baselines, defaults and ``per_family`` random valid configs per family, one build each."""
    rng = random.Random(seed)
    chosen: dict[tuple, tuple[str, ProblemSpec, KernelFamily, LauncherConfig]] = {}
    # Per family, its problems' valid configs one after another, sampled by position.
    pools: dict[str, list[tuple[ProblemSpec, KernelFamily, GridConfigs]]] = {}

    def add(label: str, problem: ProblemSpec, family: KernelFamily,
            config: LauncherConfig) -> None:
        member = next(m for m in _members(family) if m.name == config.family)
        plan = member.plan(config, problem, caps)
        chosen.setdefault((plan.source_file, tuple(sorted(plan.defines.items()))),
                          (label, problem, member, config))

    for problem in problems:
        try:
            family = search_family(problem, caps)
        except Xe2TuneError:
            continue
        for baseline in family.baselines(problem, caps):
            if family.invalid_reason(baseline.config, problem, caps) is None:
                add(baseline.label, problem, family, baseline.config)
        add("default", problem, family, family.default_config(problem, caps))
        for member in _members(family):
            pools.setdefault(member.name, []).append(
                (problem, member, valid_configs(member, problem, caps)))
    for pool in pools.values():
        total = sum(len(configs) for _, _, configs in pool)
        for position in rng.sample(range(total), min(per_family, total)):
            for problem, member, configs in pool:
                if position < len(configs):
                    add("sample", problem, member, configs[position])
                    break
                position -= len(configs)
    return list(chosen.values())


def build_samples(
    problems: Sequence[ProblemSpec], caps: DeviceCaps, *, per_family: int, seed: int = 0,
    progress: bool = True, isa_device: str | None = None,
) -> list[SampleBuild]:
    """Build the SPIR-V of the sampled configs (each in a scratch child process) and summarize;
    with ``isa_device`` (an ocloc device) also compile each build's modules for that GPU, in a
    small pool while the next config builds.

    Raises:
        Xe2CompilerMissing: with ``isa_device`` when the Xe2 compiler is not installed.
    """
    builds: list[tuple[SampleBuild, list[Future[ModuleIsa]] | None]] = []
    samples = _sample_configs(problems, caps, per_family, seed)
    with isa_pool() as pool:
        for i, (label, problem, family, config) in enumerate(samples, 1):
            if progress:
                console.print(f"building {i}/{len(samples)}: {label} {seed_vocabulary(config)}",
                              highlight=False)
            plan = family.plan(config, problem, caps)
            expected = getattr(family, "expected_matrix_mads", None)
            expected_mads = (expected(config, problem) if expected and caps.has_matrix_engine
                             else None)
            try:
                capture = capture_spirv(plan, timeout_s=BUILD_TIMEOUT_S)
            except Xe2TuneError as exc:
                builds.append((SampleBuild(label, config, None, expected_mads,
                                           str(exc).splitlines()[0], 0.0), None))
                continue
            futures = [pool.submit(compile_isa, IsaJob(image, module, isa_device))
                       for image, module in zip(capture.images, capture.modules, strict=True)
                       ] if isa_device is not None else None
            builds.append((SampleBuild(label, config, capture.summary_dict(), expected_mads,
                                       None, capture.build_seconds), futures))
        return [dataclasses.replace(b, isa=tuple(f.result() for f in futures))
                if futures is not None else b for b, futures in builds]


def _plan_dict(p: ProblemPlan) -> dict[str, Any]:
    return {
        "problem": p.problem.to_dict(), "family": p.family, "unavailable": p.unavailable,
        "spaces": [vars(s) for s in p.spaces],
        "baselines": [{**b, "config": b["config"].to_dict()} for b in p.baselines],
        "default": p.default.to_dict() if p.default else None,
        "build_options": p.build_options,
    }


def print_dry_run(
    problems: Sequence[ProblemSpec], caps: DeviceCaps, *, target: str, sample: int,
    as_json: bool,
) -> None:
    """Print the plan of every problem, then build and summarize a sample of configs."""
    plans = [plan_problem(p, caps) for p in problems]
    description = describe_live_device(caps.name)
    lookup = locate_xe2_compiler()
    isa_device = description.ocloc_device if description and lookup.compiler else None
    isa_unavailable = (None if isa_device else lookup.reason if description else
                       f"{caps.name} is no catalog GPU")
    builds = build_samples(problems, caps, per_family=sample, progress=not as_json,
                           isa_device=isa_device)
    if as_json:
        print(json.dumps({
            "target": target, "device": caps.name, "isa_target": isa_device,
            "isa_unavailable": isa_unavailable,
            "problems": [_plan_dict(p) for p in plans],
            "builds": [{"label": b.label, "config": b.config.to_dict(), "spirv": b.summary,
                        "expected_matrix_mads": b.expected_mads, "error": b.error,
                        "build_s": round(b.seconds, 2), "isa_verdict": b.isa_verdict,
                        "isa_spill_bytes": b.isa_spill_bytes,
                        "isa": [m.to_dict() for m in b.isa] if b.isa is not None else None}
                       for b in builds],
        }, indent=2))
        return
    console.print(f"[bold]dry run on {target}[/] ({caps.name}): nothing is run", highlight=False)
    for p in plans:
        pr = p.problem
        console.print(f"\n[bold]{pr.mode} {head_words(pr)} q={pr.q_len} kv={pr.kv_len} "
                      f"heads {pr.heads_q}/{pr.heads_kv} batch {pr.batch} causal={pr.causal}[/]",
                      highlight=False)
        if p.unavailable:
            console.print(f"  not searched: {p.unavailable}", highlight=False)
            continue
        for s in p.spaces:
            console.print(f"  space {s.family}: {s.valid} valid of {s.cartesian} combinations",
                          highlight=False)
        for b in p.baselines:
            verdict = "valid" if b["valid"] else f"INVALID: {b['reason']}"
            console.print(f"  baseline {b['label']}: {seed_vocabulary(b['config'])} -> {verdict}",
                          highlight=False)
        if p.default:
            console.print(f"  default: {seed_vocabulary(p.default)}", highlight=False)
            console.print(f"  build options: {' '.join(p.build_options)}", highlight=False)
    console.print(f"\n[bold]SPIR-V of {len(builds)} sampled builds[/]", highlight=False)
    console.print(f"ISA for {isa_device}: compiled only, never run" if isa_device else
                  f"ISA: not compiled ({isa_unavailable})", highlight=False, markup=False)
    for b in builds:
        if b.error:
            console.print(f"  {b.label} {seed_vocabulary(b.config)}: build FAILED: {b.error}",
                          highlight=False)
            continue
        console.print(f"  {b.label} {seed_vocabulary(b.config)}: {_summary_text(b)}"
                      f"{_isa_mark(b)}", highlight=False, markup=False)
        for k in b.isa_kernels:
            console.print(f"    ISA {k.target} {k.kernel}: {_isa_text(k)}", highlight=False,
                          markup=False)


def _isa_mark(build: SampleBuild) -> str:
    if build.isa_verdict not in (None, Verdict.COMPILED.value):
        return f" [ISA FAILED: {build.isa_verdict}]"
    return f" [spills {build.isa_spill_bytes} B]" if build.isa_spill_bytes else ""


def _isa_text(k: KernelIsa) -> str:
    if k.verdict is not Verdict.COMPILED:
        return f"FAILED: {k.message}"
    spill = f"spills {k.spill_bytes} B" if k.spill_bytes else "no spill"
    counts = (f", {k.counts.dpas} DPAS, {k.counts.block2d_loads} 2D block loads"
              if k.counts else f" ({k.message})")
    return f"compiled, {k.grf_count} GRF, {k.threads_per_eu} threads/EU, {spill}{counts}"


def _summary_text(build: SampleBuild) -> str:
    s = build.summary or {}
    expected = (f" (config implies {build.expected_mads})"
                if build.expected_mads is not None else "")
    return (f"matrix MADs {s.get('matrix_mads')}{expected}, subgroup "
            f"{s.get('subgroup_sizes')}, registers {s.get('register_modes')}, local memory "
            f"{s.get('local_memory_bytes')} B, {build.seconds:.1f} s")
