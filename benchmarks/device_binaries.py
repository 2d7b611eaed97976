"""A config built by successive processes: device binaries kept, against the runtime cache alone.

Usage:
  python benchmarks/device_binaries.py [--processes 3] [--rounds 3]

Each round starts from an empty cache dir (``XE2TUNE_CACHE_DIR``; the native extension and the
precompiled SYCL preamble copied in, so the first build is a kernel's compile alone) and starts
``--processes`` processes one after another, each building the default configs of
``xe2tune search --head-dim 128``'s prefill and decode problems on ``opencl:cpu`` and printing
their build seconds. Side "kept" keeps the device binaries (kernels/_device_binaries.py); side
"runtime cache only" deletes them before each process, which leaves the SYCL runtime's own
persistent cache as the only one (as before they were kept). Sides alternate within each round.
Prints each side's median build seconds per process position.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from xe2tune.config import cache_dir

SIDES = ("kept", "runtime cache only")
_BUILD = """
import json, time
from xe2tune.harness import device_caps, open_queue
from xe2tune.kernels import ProblemSpec, build_program, family_for_mode
queue = open_queue("opencl:cpu")
caps = device_caps(queue.sycl_device)
seconds = {}
for problem in (ProblemSpec("prefill", 128, "fp16", 512, 512, causal=True),
                ProblemSpec("decode", 128, "fp16", 1, 4096, heads_q=32, heads_kv=8)):
    family = family_for_mode(problem.mode)
    plan = family.plan(family.default_config(problem, caps), problem, caps)
    started = time.perf_counter()
    build_program(queue, plan.source_file, plan.kernel_names, plan.defines)
    seconds[problem.mode] = time.perf_counter() - started
print(json.dumps(seconds))
"""


def run_side(side: str, processes: int) -> list[dict[str, float]]:
    """Build seconds of each process of one side, in a cache dir of its own."""
    with tempfile.TemporaryDirectory(prefix="xe2tune-bench-") as scratch:
        for name in ("native", "sycl-preambles"):
            if (cache_dir() / name).is_dir():
                shutil.copytree(cache_dir() / name, Path(scratch) / name)
        env = {k: v for k, v in os.environ.items() if k != "SYCL_CACHE_DIR"}
        env["XE2TUNE_CACHE_DIR"] = scratch
        out = []
        for _ in range(processes):
            if side != "kept":
                shutil.rmtree(Path(scratch) / "device-binaries", ignore_errors=True)
            proc = subprocess.run([sys.executable, "-c", _BUILD], env=env, capture_output=True,
                                  text=True, check=True)
            out.append(json.loads(proc.stdout))
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    results: dict[str, list[list[dict[str, float]]]] = {side: [] for side in SIDES}
    for round_ in range(args.rounds):
        for side in SIDES if round_ % 2 == 0 else reversed(SIDES):
            results[side].append(run_side(side, args.processes))
    print(f"build seconds, median of {args.rounds} rounds, by process (1 = first to build)")
    for mode in ("prefill", "decode"):
        for side in SIDES:
            medians = [statistics.median(r[i][mode] for r in results[side])
                       for i in range(args.processes)]
            print(f"  {mode:8s} {side:19s} " + "  ".join(f"{m:7.3f}" for m in medians))


if __name__ == "__main__":
    main()
