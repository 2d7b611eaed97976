"""Time a handful of SDPA configs on the default shapes: how the families' defaults were chosen.

Usage: python benchmarks/kernel_defaults.py [prefill|decode] [--device F] [--iters N]
       [--rounds R] [--dtype fp16|bf16|fp32] [--kv-dtype e4m3|e5m2] [--seq S] [--causal]
       [--heads Q/KV] [--params JSON ...] [--base REV]

Prefill: head dim 128, fp16, seq 1024, 8 heads, non-causal (GFLOP/s). Decode: head dim 128, fp16,
32 query / 8 KV heads, kv 4096, q_len 1 (GB/s of Q, K, V read + O written); --dtype and --seq
change the dtype and the (kv) sequence length, --heads the query / KV heads, --kv-dtype stores
K/V in FP8, --causal masks.
Each config is built and verified against the reference first; then the configs are timed in
--rounds alternating rounds of --iters launches each (device event profiling), so that a slow
minute on a shared machine hits every config, not one; each launch takes the next of buffer sets
rotated past twice the host's last-level cache, as the harness does. Times are medians (and the
best) over all rounds. --base also builds every config from the kernel sources of that git
revision (``git show``) and times it in the same rounds, beside this tree's, with the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
from dataclasses import dataclass, field

import numpy as np
from _args import heads_pair  # benchmarks/, the script's own dir
from _revision import kernel_sources

from xe2tune.errors import InvalidConfig, InvalidProblem
from xe2tune.harness import (
    BufferRotation,
    PlanExecutor,
    device_caps,
    device_seconds,
    last_level_cache_bytes,
    open_queue,
    sdpa_work,
)
from xe2tune.kernels import (
    KV_DTYPES,
    ProblemSpec,
    build_program,
    check_output,
    family_for_mode,
    make_inputs,
    reference_sdpa,
)

PROBLEMS = {
    "prefill": ProblemSpec("prefill", 128, "fp16", 1024, 1024, heads_q=8, heads_kv=8),
    "decode": ProblemSpec("decode", 128, "fp16", 1, 4096, heads_q=32, heads_kv=8),
}


@dataclass
class Candidate:
    """One config, built, verified and ready to launch; its timings accumulate over rounds."""

    overrides: dict
    revision: str | None  # the git revision whose kernel sources it was built from; None: this tree
    executor: PlanExecutor
    rotation: BufferRotation
    passed: bool
    build_s: float
    times: list[float] = field(default_factory=list)

    def time(self, iters: int) -> None:
        for _ in range(iters):
            self.times.append(device_seconds(self.executor.launch_and_wait(self.rotation.take())))


@functools.cache
def _sources(revision: str) -> dict[str, str]:
    return kernel_sources(revision)


def prepare(queue, caps, problem: ProblemSpec, overrides: dict, revision: str | None,
            inputs: tuple[np.ndarray, ...], reference: np.ndarray) -> Candidate:
    family = family_for_mode(problem.mode)
    params = {**family.params_from_config(family.default_config(problem, caps)), **overrides}
    config = family.config_from_params(problem, params)
    plan = family.plan(config, problem, caps)
    sources = _sources(revision) if revision is not None else None
    built = build_program(queue, plan.source_file, plan.kernel_names, plan.defines,
                          sources=sources)
    executor = PlanExecutor(queue, built, plan, problem)
    rotation = BufferRotation(lambda _i: executor.allocate(*inputs), 4,
                              executor.buffer_set_bytes, last_level_cache_bytes(queue.sycl_device))
    executor.launch_and_wait(rotation.sets[0])
    report = check_output(problem, executor.read_output(rotation.sets[0]), reference)
    return Candidate(overrides, revision, executor, rotation, report.passed, built.build_seconds)


def summary(problem: ProblemSpec, c: Candidate, tree: Candidate | None) -> str:
    """``c``'s line; with ``tree`` (this tree's build of the same config, ``c`` being
    another revision's), also the median of this tree's time / ``c``'s over their launches
    paired by round and place."""
    t, best = statistics.median(c.times), min(c.times)
    work = sdpa_work(problem)
    work, unit = (work.flops, "GFLOP/s") if problem.mode == "prefill" else (work.bytes, "GB/s")
    rate = f"{work / t / 1e9:6.2f} {unit} (best {work / best / 1e9:6.2f})"
    line = (f"{rate}  {t * 1e3:8.2f} ms  correct={c.passed}  "
            f"build={c.build_s:.1f}s  {json.dumps(c.overrides or 'default')}")
    if tree is None:
        return line
    ratios = [a / b for a, b in zip(tree.times, c.times, strict=True)]
    return f"{line}  [{c.revision}; this tree / {c.revision}: {statistics.median(ratios):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(PROBLEMS))
    parser.add_argument("--device", default="opencl:cpu")
    parser.add_argument("--iters", type=int, default=5, help="timed launches per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--dtype", choices=("fp16", "bf16", "fp32"))
    parser.add_argument("--kv-dtype", choices=KV_DTYPES, help="K/V in this FP8 format")
    parser.add_argument("--seq", type=int, help="sequence length (kv length for decode)")
    parser.add_argument("--causal", action="store_true", help="bottom-right causal mask")
    parser.add_argument("--heads", type=heads_pair, help="query/KV heads, such as 32/32")
    parser.add_argument("--params", nargs="*", default=["{}"],
                        help="JSON objects of parameters overriding the default config")
    parser.add_argument("--base", help="also time each config built from this git revision's "
                        "kernel sources")
    args = parser.parse_args()
    queue = open_queue(args.device)
    caps = device_caps(queue.sycl_device)
    problem = PROBLEMS[args.mode]
    if args.dtype:
        problem = dataclasses.replace(problem, dtype=args.dtype)
    if args.seq:
        q_len = problem.q_len if problem.mode == "decode" else args.seq
        problem = dataclasses.replace(problem, q_len=q_len, kv_len=args.seq)
    if args.causal:
        problem = dataclasses.replace(problem, causal=True)
    if args.heads:
        problem = dataclasses.replace(problem, heads_q=args.heads[0], heads_kv=args.heads[1])
    if args.kv_dtype:
        problem = dataclasses.replace(problem, kv_dtype=args.kv_dtype)
    inputs = make_inputs(problem)
    reference = reference_sdpa(problem, *inputs)
    revisions = [None, args.base] if args.base else [None]
    try:
        candidates = [prepare(queue, caps, problem, json.loads(text), revision, inputs,
                              reference)
                      for text in args.params for revision in revisions]
    except (json.JSONDecodeError, InvalidConfig, InvalidProblem) as exc:
        parser.error(f"--params: {exc}")
    for round_ in range(args.rounds):
        for c in candidates if round_ % 2 == 0 else reversed(candidates):
            c.time(args.iters)
    for c in candidates:
        tree = next(t for t in candidates if t.revision is None and t.overrides == c.overrides)
        print(summary(problem, c, tree if c is not tree else None), flush=True)


if __name__ == "__main__":
    main()
