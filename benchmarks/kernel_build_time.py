"""Build time of the same kernel plans from another revision's kernel sources and from this tree's.

Usage:
  python benchmarks/kernel_build_time.py [--base 2caeb7a] [--configs 3 | --defaults] [--rounds 2]

For the default CPU problems of ``xe2tune search --head-dim 128`` (prefill seq 512 causal,
decode kv 4096 32/8 heads, fp16), ``--configs`` valid configs per problem spread over the first
family's space (with ``--defaults``: the family's default config, the one a search times first)
are built through the run-time compiler on the ``opencl:cpu`` device from the
kernel sources of ``--base`` (read with ``git show``) and from the working tree's, in
alternating rounds (base first in even rounds, this tree first in odd ones). The runtime's
persistent cache is off and every build gets options of its own, so each one compiles. Prints
each side's median build time and their ratio (> 1: this tree builds slower).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["SYCL_CACHE_PERSISTENT"] = "0"  # before the runtime loads: every build compiles

from _revision import kernel_sources  # noqa: E402  (benchmarks/, the script's own dir)

from xe2tune.harness import device_caps, open_queue  # noqa: E402  (sets the SYCL runtime env)
from xe2tune.kernels import ProblemSpec, build_program, families_for  # noqa: E402

PROBLEMS = (
    ProblemSpec("prefill", 128, "fp16", 512, 512, causal=True),
    ProblemSpec("decode", 128, "fp16", 1, 4096, heads_q=32, heads_kv=8),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="2caeb7a", help="the revision to compare against")
    parser.add_argument("--configs", type=int, default=3, help="configs per problem")
    parser.add_argument("--defaults", action="store_true",
                        help="build each problem's default config instead")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    queue = open_queue("opencl:cpu")
    caps = device_caps(queue.sycl_device)
    plans = []
    for problem in PROBLEMS:
        family = families_for(problem, caps)[0]
        if args.defaults:
            plans.append(family.plan(family.default_config(problem, caps), problem, caps))
            continue
        configs = list(family.valid_configs(problem, caps))
        step = max(1, len(configs) // args.configs)
        plans += [family.plan(c, problem, caps) for c in configs[::step][:args.configs]]
    sides = {"base": kernel_sources(args.base), "tree": None}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(args.rounds):
        order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
        for name in order:
            for i, plan in enumerate(plans):
                # an option of its own: neither the in-process nor the runtime's cache can hit
                defines = {**plan.defines, "BUILD_TIME_PROBE": f"{round_}{i}{name}"}
                start = time.perf_counter()
                build_program(queue, plan.source_file, plan.kernel_names, defines,
                              sources=sides[name])
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(v) for name, v in times.items()}
    for name, values in times.items():
        label = args.base if name == "base" else "this tree"
        print(f"{label:>10}: median build {medians[name]:.2f} s over {len(values)} builds "
              f"(range {min(values):.2f}-{max(values):.2f} s)")
    print(f"this tree / {args.base}: {medians['tree'] / medians['base']:.3f}")


if __name__ == "__main__":
    main()
