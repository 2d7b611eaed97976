"""Time a handful of SDPA configs on the default shapes: how the families' defaults were chosen.

Usage: python benchmarks/kernel_defaults.py [prefill|decode] [--device F] [--iters N]
       [--dtype fp16|bf16|fp32] [--seq S] [--params JSON ...]

Prefill: head dim 128, fp16, seq 1024, 8 heads, non-causal (GFLOP/s). Decode: head dim 128, fp16,
32 query / 8 KV heads, kv 4096, q_len 1 (GB/s of Q, K, V read + O written); --dtype and --seq
change the dtype and the (kv) sequence length. Each config is
verified against the reference before it is timed; times are medians (and the best) of device
event profiling over --iters launches.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics

from xe2tune.harness import device_caps, open_queue
from xe2tune.harness._executor import PlanExecutor
from xe2tune.kernels import (
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


def measure(queue, caps, problem: ProblemSpec, overrides: dict, iters: int) -> str:
    family = family_for_mode(problem.mode)
    params = {**family.params_from_config(family.default_config(problem, caps)), **overrides}
    config = family.config_from_params(problem, params)
    plan = family.plan(config, problem, caps)
    built = build_program(queue, plan.source_file, plan.kernel_names, plan.defines)
    executor = PlanExecutor(queue, built, plan, problem)
    inputs = make_inputs(problem)
    buffers = executor.allocate(*inputs)
    executor.launch_and_wait(buffers)
    report = check_output(problem, executor.read_output(buffers), reference_sdpa(problem, *inputs))
    times = []
    for _ in range(iters + 1):
        events = executor.launch_and_wait(buffers)
        times.append((events[-1].profiling_info_end - events[0].profiling_info_start) * 1e-9)
    t, best = statistics.median(times[1:]), min(times[1:])
    p = problem
    if p.mode == "prefill":
        work, unit = 4 * p.batch * p.heads_q * p.q_len * p.kv_len * p.head_dim, "GFLOP/s"
    else:
        work, unit = sum(a.nbytes for a in inputs) + inputs[0].nbytes, "GB/s"
    rate = f"{work / t / 1e9:6.2f} {unit} (best {work / best / 1e9:6.2f})"
    return (f"{rate}  {t * 1e3:8.2f} ms  correct={report.passed}  "
            f"build={built.build_seconds:.1f}s  {json.dumps(overrides or 'default')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(PROBLEMS))
    parser.add_argument("--device", default="opencl:cpu")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--dtype", choices=("fp16", "bf16", "fp32"))
    parser.add_argument("--seq", type=int, help="sequence length (kv length for decode)")
    parser.add_argument("--params", nargs="*", default=["{}"],
                        help="JSON objects of parameters overriding the default config")
    args = parser.parse_args()
    queue = open_queue(args.device)
    caps = device_caps(queue.sycl_device)
    problem = PROBLEMS[args.mode]
    if args.dtype:
        problem = dataclasses.replace(problem, dtype=args.dtype)
    if args.seq:
        q_len = problem.q_len if problem.mode == "decode" else args.seq
        problem = dataclasses.replace(problem, q_len=q_len, kv_len=args.seq)
    for text in args.params:
        print(measure(queue, caps, problem, json.loads(text), args.iters), flush=True)


if __name__ == "__main__":
    main()
