"""FP8 K/V against fp16 K/V, and latent (MLA) decode against torch's CPU SDPA, side by side.

Usage:
  python benchmarks/kv_variants.py fp8 [--seq 16384] [--gqa 32/8 8/8] [--iters 5] [--rounds 6]
                                      [--base REV]
  python benchmarks/kv_variants.py mla [--seq 4096] [--heads 16 128] [--iters 5] [--rounds 6]

``fp8``: decode hd 128, q_len 1, kv_len --seq, Q/O fp16, for each --gqa pair of query / KV heads
(default 32/8: 4 query rows per KV head; 8/8 reads the same bytes with one row per KV head): K/V
in fp16, e4m3 and e5m2 (per-KV-head scales), each with its family default, every output checked
against the float64 reference, timed by device profiling on rotated buffer sets (last-level
cache busted), all in the same alternating rounds; prints each one's median time and, per
round, its time over the fp16 K/V time of its heads in the same round. ``--base REV`` adds fp16
and e4m3 K/V built from the kernel sources of git revision REV (same configs), to see what a
kernel change did in the same run.
``mla``: absorbed MLA decode D 576 / Dv 512, one latent K/V head, --heads query heads, bf16:
ours (family default, device profiling as above) against torch.nn.functional.
scaled_dot_product_attention on CPU tensors of the same values (K/V expanded over the heads by
enable_gqa; wall clock around each call), in alternating rounds; "ours/torch" is a speed ratio
(> 1: ours faster). Needs torch (the [test] or [bench] extra).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import time

import numpy as np
from _args import heads_pair  # benchmarks/, the script's own dir
from _revision import kernel_sources

from xe2tune.harness import (  # first: sets the SYCL runtime env before dpctl loads
    BufferRotation,
    PlanExecutor,
    device_caps,
    device_seconds,
    last_level_cache_bytes,
    open_queue,
    sdpa_work,
)
from xe2tune.kernels import (
    ProblemSpec,
    build_program,
    check_output,
    family_for_mode,
    make_inputs,
    reference_sdpa,
)


@dataclasses.dataclass
class Timed:
    """One problem built with its family default, ready to time on rotated buffer sets."""

    label: str
    problem: ProblemSpec
    executor: PlanExecutor
    rotation: BufferRotation
    passed: bool
    times: list[float] = dataclasses.field(default_factory=list)

    def time(self, iters: int) -> float:
        """Median device seconds of ``iters`` launches (recorded)."""
        times = [device_seconds(self.executor.launch_and_wait(self.rotation.take()))
                 for _ in range(iters)]
        self.times += times
        return statistics.median(times)


def prepare(queue, caps, label: str, problem: ProblemSpec, inputs: tuple,
            sources: dict[str, str] | None = None) -> Timed:
    family = family_for_mode(problem.mode)
    plan = family.plan(family.default_config(problem, caps), problem, caps)
    built = build_program(queue, plan.source_file, plan.kernel_names, plan.defines,
                          sources=sources)
    executor = PlanExecutor(queue, built, plan, problem)
    rotation = BufferRotation(lambda _i: executor.allocate(*inputs), 4,
                              executor.buffer_set_bytes, last_level_cache_bytes(queue.sycl_device))
    executor.launch_and_wait(rotation.sets[0])
    report = check_output(problem, executor.read_output(rotation.sets[0]),
                          reference_sdpa(problem, *inputs))
    return Timed(label, problem, executor, rotation, report.passed)


def run_fp8(queue, caps, args) -> None:
    timed: list[tuple[Timed, Timed]] = []  # (each K/V type's, the fp16 K/V one of its heads)
    for heads_q, heads_kv in args.gqa:
        base = ProblemSpec("decode", 128, "fp16", 1, args.seq, heads_q=heads_q, heads_kv=heads_kv)
        heads = f"{heads_q}/{heads_kv} heads"
        fp16, *fp8 = [prepare(queue, caps, f"{heads} {kv} K/V", problem,
                              make_inputs(problem, seed=1))
                      for kv, problem in (("fp16", base),
                                          ("e4m3", dataclasses.replace(base, kv_dtype="e4m3")),
                                          ("e5m2", dataclasses.replace(base, kv_dtype="e5m2")))]
        if args.base:
            fp8 += [prepare(queue, caps, f"{t.label} at {args.base}", t.problem,
                            make_inputs(t.problem, seed=1), args.base_sources)
                    for t in (fp16, fp8[0])]
        timed += [(t, fp16) for t in (fp16, *fp8)]
    ratios: dict[str, list[float]] = {t.label: [] for t, _ in timed}
    for _ in range(args.rounds):
        medians = {t.label: t.time(args.iters) for t, _ in timed}
        for t, fp16 in timed:
            ratios[t.label].append(medians[t.label] / medians[fp16.label])
    print(f"decode hd128 q_len 1 kv {args.seq}, {args.rounds} alternating rounds "
          f"x {args.iters} launches", flush=True)
    for t, fp16 in timed:
        seconds = statistics.median(t.times)
        gbs = sdpa_work(t.problem).bytes / seconds / 1e9
        rounds = " ".join(f"{r:.2f}" for r in ratios[t.label])
        print(f"  {t.label}: {seconds * 1e3:7.3f} ms  {gbs:6.1f} GB/s  correct={t.passed}  "
              f"time / {fp16.label}: median {statistics.median(ratios[t.label]):.2f} "
              f"(rounds {rounds})", flush=True)


def torch_seconds(q, k, v, iters: int) -> tuple[float, np.ndarray]:
    import torch

    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float32)).to(torch.bfloat16)
                  .transpose(1, 2) for a in (q, k, v))
    times = []
    out = None
    for _ in range(iters):
        started = time.perf_counter()
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times), out.transpose(1, 2).float().numpy()


def run_mla(queue, caps, args) -> None:
    for heads in args.heads:
        problem = ProblemSpec("decode", 576, "bf16", 1, args.seq, heads_q=heads, heads_kv=1,
                              head_dim_v=512)
        inputs = make_inputs(problem, seed=2)
        ours = prepare(queue, caps, "ours", problem, inputs)
        _, torch_out = torch_seconds(*inputs, 1)
        torch_ok = check_output(problem, torch_out, reference_sdpa(problem, *inputs)).passed
        ratios, torch_times = [], []
        for _ in range(args.rounds):
            t_torch, _ = torch_seconds(*inputs, args.iters)
            t_ours = ours.time(args.iters)
            torch_times.append(t_torch)
            ratios.append(t_torch / t_ours)
        t_ours = statistics.median(ours.times)
        print(f"MLA decode D576/Dv512 bf16 {heads} heads / 1 KV head, kv {args.seq}: ours "
              f"{t_ours * 1e3:.3f} ms (correct={ours.passed}), torch "
              f"{statistics.median(torch_times) * 1e3:.3f} ms (correct={torch_ok}), "
              f"ours/torch median {statistics.median(ratios):.2f} (rounds "
              f"{' '.join(f'{r:.2f}' for r in ratios)})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("fp8", "mla"))
    parser.add_argument("--device", default="opencl:cpu")
    parser.add_argument("--seq", type=int, help="kv length (fp8: 16384, mla: 4096)")
    parser.add_argument("--heads", type=int, nargs="*", default=[16, 128],
                        help="query heads of the MLA decode problems")
    parser.add_argument("--gqa", type=heads_pair, nargs="+", default=[(32, 8)],
                        help="query/KV heads of the FP8 decode problems (default 32/8)")
    parser.add_argument("--iters", type=int, default=5, help="timed launches per round")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds")
    parser.add_argument("--base", help="fp8: also time fp16 K/V built from this git revision")
    args = parser.parse_args()
    args.seq = args.seq or (16384 if args.what == "fp8" else 4096)
    if args.base:
        # Read before anything is built: a revision git does not know is a one-line error.
        try:
            args.base_sources = kernel_sources(args.base)
        except subprocess.CalledProcessError as exc:
            parser.error(f"--base {args.base}: {exc.stderr.strip().splitlines()[-1]}")
    queue = open_queue(args.device)
    caps = device_caps(queue.sycl_device)
    (run_fp8 if args.what == "fp8" else run_mla)(queue, caps, args)


if __name__ == "__main__":
    main()
