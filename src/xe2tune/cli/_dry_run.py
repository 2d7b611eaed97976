"""``xe2tune search --dry-run``: what a search would explore on a device, without running it.

For each problem: the space (Cartesian combinations vs valid configs, per family), the seeded
baselines with their validity, the default, the build options of the first config; then the
SPIR-V of a sample of the valid configs, built through the same run-time compiler as a real
search (building needs no GPU: a catalog device only changes the defines) and summarized.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xe2tune.cli._app import console
from xe2tune.cli._vocabulary import seed_vocabulary
from xe2tune.errors import Xe2TuneError
from xe2tune.kernels import (
    DeviceCaps,
    KernelFamily,
    LauncherConfig,
    ProblemSpec,
    capture_spirv,
    define_flags,
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
    # What the families' spaces and validation read of a problem: its mode, head dim, dtype and
    # heads, and (through the space itself) the decode rows; never the sequence lengths, batch
    # or mask (tests/test_dry_run.py checks this for every family). Problems that differ only
    # there share one enumeration: a dry run of the default GPU problems enumerates ~300,000
    # candidate configs per problem.
    space = tuple((n, tuple(v)) for n, v in member.parameter_space(problem).items())
    return (member.name, space, problem.mode, problem.head_dim, problem.dtype, problem.heads_q,
            problem.heads_kv, caps)


_VALID: dict[tuple, tuple[LauncherConfig, ...]] = {}


def valid_configs(member: KernelFamily, problem: ProblemSpec,
                  caps: DeviceCaps) -> tuple[LauncherConfig, ...]:
    """A member family's valid configs for the problem, enumerated once per space key."""
    key = _space_key(member, problem, caps)
    if key not in _VALID:
        _VALID[key] = tuple(member.valid_configs(problem, caps))
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
    """One sampled config's build: its SPIR-V summary, or why it did not build."""

    label: str
    config: LauncherConfig
    summary: dict[str, Any] | None
    expected_mads: int | None
    error: str | None
    seconds: float


def _sample_configs(
    problems: Sequence[ProblemSpec], caps: DeviceCaps, per_family: int, seed: int
) -> list[tuple[str, ProblemSpec, KernelFamily, LauncherConfig]]:
    """Baselines, defaults and ``per_family`` random valid configs per family, one build each."""
    rng = random.Random(seed)
    chosen: dict[tuple, tuple[str, ProblemSpec, KernelFamily, LauncherConfig]] = {}
    pools: dict[str, list[tuple[ProblemSpec, KernelFamily, LauncherConfig]]] = {}

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
            pool = pools.setdefault(member.name, [])
            pool.extend((problem, member, c) for c in valid_configs(member, problem, caps))
    for pool in pools.values():
        for problem, member, config in rng.sample(pool, min(per_family, len(pool))):
            add("sample", problem, member, config)
    return list(chosen.values())


def build_samples(
    problems: Sequence[ProblemSpec], caps: DeviceCaps, *, per_family: int, seed: int = 0,
    progress: bool = True,
) -> list[SampleBuild]:
    """Build the SPIR-V of the sampled configs (each in a scratch child process) and summarize."""
    builds = []
    samples = _sample_configs(problems, caps, per_family, seed)
    for i, (label, problem, family, config) in enumerate(samples, 1):
        if progress:
            console.print(f"building {i}/{len(samples)}: {label} {seed_vocabulary(config)}",
                          highlight=False)
        plan = family.plan(config, problem, caps)
        expected = getattr(family, "expected_matrix_mads", None)
        expected_mads = expected(config, problem) if expected and caps.has_matrix_engine else None
        try:
            capture = capture_spirv(plan, timeout_s=BUILD_TIMEOUT_S)
        except Xe2TuneError as exc:
            builds.append(SampleBuild(label, config, None, expected_mads,
                                      str(exc).splitlines()[0], 0.0))
            continue
        builds.append(SampleBuild(label, config, capture.summary_dict(), expected_mads, None,
                                  capture.build_seconds))
    return builds


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
    builds = build_samples(problems, caps, per_family=sample, progress=not as_json)
    if as_json:
        print(json.dumps({
            "target": target, "device": caps.name,
            "problems": [_plan_dict(p) for p in plans],
            "builds": [{"label": b.label, "config": b.config.to_dict(), "spirv": b.summary,
                        "expected_matrix_mads": b.expected_mads, "error": b.error,
                        "build_s": round(b.seconds, 2)} for b in builds],
        }, indent=2))
        return
    console.print(f"[bold]dry run on {target}[/] ({caps.name}): nothing is run", highlight=False)
    for p in plans:
        pr = p.problem
        console.print(f"\n[bold]{pr.mode} D={pr.head_dim} {pr.dtype} q={pr.q_len} kv={pr.kv_len} "
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
    for b in builds:
        if b.error:
            console.print(f"  {b.label} {seed_vocabulary(b.config)}: build FAILED: {b.error}",
                          highlight=False)
            continue
        console.print(f"  {b.label} {seed_vocabulary(b.config)}: {_summary_text(b)}",
                      highlight=False)


def _summary_text(build: SampleBuild) -> str:
    s = build.summary or {}
    expected = (f" (config implies {build.expected_mads})"
                if build.expected_mads is not None else "")
    return (f"matrix MADs {s.get('matrix_mads')}{expected}, subgroup "
            f"{s.get('subgroup_sizes')}, registers {s.get('register_modes')}, local memory "
            f"{s.get('local_memory_bytes')} B, {build.seconds:.1f} s")
