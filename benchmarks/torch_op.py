"""The torch operator's cost per call, beside ``xe2tune.sdpa()`` and torch's own CPU SDPA.

Usage: python benchmarks/torch_op.py [--calls N] [--rounds K] [--tuned]

For each shape, in one process and on the same values: ``xe2tune.torch.
scaled_dot_product_attention`` on tensors in the layout models pass ([b, s, h, d] memory viewed
[b, h, s, d]: read in place); the operator on [b, h, s, d]-contiguous memory (copied to the
kernels' layout on every call: what that layout costs); ``xe2tune.sdpa()`` on numpy arrays of
the first memory (copied to USM and back on every call); and
``torch.nn.functional.scaled_dot_product_attention`` on both layouts. xe2tune's sides launch
the family default (``--tuned``: the stored best, as the operator does by default; the results
database may change under a running search, the default does not). Each is timed by
wall clock around N calls after a warm-up (builds and tuned lookups happen there), in K
alternating rounds (each side in turn, round after round); a side's time is the median over
rounds of its per-round median: these shared machines drift by tens of percent within minutes.
The smallest shape's kernel runs for microseconds, so its times are mostly per-call overhead.
Prints one table; "op" is the in-place operator, "op copy" the copied layout, "torch" and
"torch bhsd" torch on the transposed views and on [b, h, s, d]-contiguous memory; "sdpa()/op"
and "torch/op" (torch's faster layout) are time ratios (> 1: the operator is faster). Needs the
`torch` extra.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

import xe2tune  # first: sets the SYCL runtime env before dpctl loads
import xe2tune.torch as xt
from xe2tune.kernels import ProblemSpec

SHAPES = [
    ProblemSpec(mode="decode", head_dim=64, dtype="fp16", q_len=1, kv_len=64, heads_q=1,
                heads_kv=1),
    ProblemSpec(mode="decode", head_dim=128, dtype="fp16", q_len=1, kv_len=4096, heads_q=32,
                heads_kv=8),
    ProblemSpec(mode="prefill", head_dim=64, dtype="fp16", q_len=256, kv_len=256, heads_q=8,
                heads_kv=8, causal=True),
    ProblemSpec(mode="prefill", head_dim=128, dtype="fp16", q_len=1024, kv_len=1024,
                heads_q=8, heads_kv=8, causal=True),
    ProblemSpec(mode="prefill", head_dim=128, dtype="fp32", q_len=1024, kv_len=1024,
                heads_q=8, heads_kv=8),
]
TORCH_DTYPES = {"fp16": torch.float16, "fp32": torch.float32}


def _label(p: ProblemSpec) -> str:
    heads = f"{p.heads_q}/{p.heads_kv}" if p.heads_q != p.heads_kv else str(p.heads_q)
    seq = f"q{p.q_len} kv{p.kv_len}" if p.mode == "decode" else f"s{p.q_len}"
    return f"{p.mode} hd{p.head_dim} {heads}h {p.dtype} {seq}{' causal' if p.causal else ''}"


def _median_call(fn: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us" if seconds < 1e-2 else f"{seconds * 1e3:.1f} ms"


def run_shape(p: ProblemSpec, calls: int, rounds: int,
              config: str | None) -> dict[str, float]:
    """Median seconds per call of the operator, sdpa() and torch for one shape."""
    rng = np.random.default_rng(0)
    dt = TORCH_DTYPES[p.dtype]

    def make(seq: int, heads: int) -> torch.Tensor:  # [b, s, h, d] memory
        return torch.from_numpy(rng.standard_normal(
            (p.batch, seq, heads, p.head_dim), dtype=np.float32)).to(dt)

    q, k, v = make(p.q_len, p.heads_q), make(p.kv_len, p.heads_kv), make(p.kv_len, p.heads_kv)
    arrays = [t.numpy() for t in (q, k, v)]  # the same memory, as xe2tune.sdpa() takes it
    views = [t.transpose(1, 2) for t in (q, k, v)]  # [b, h, s, d], as models pass it
    head_major = [t.contiguous() for t in views]  # [b, h, s, d] memory: the operator copies
    gqa = p.heads_q != p.heads_kv
    sides = {
        "op": lambda: xt.scaled_dot_product_attention(*views, is_causal=p.causal,
                                                      enable_gqa=gqa, config=config),
        "op copy": lambda: xt.scaled_dot_product_attention(*head_major, is_causal=p.causal,
                                                           enable_gqa=gqa, config=config),
        "sdpa()": lambda: xe2tune.sdpa(*arrays, causal=p.causal, config=config),
        "torch": lambda: torch.nn.functional.scaled_dot_product_attention(
            *views, is_causal=p.causal, enable_gqa=gqa),
        "torch bhsd": lambda: torch.nn.functional.scaled_dot_product_attention(
            *head_major, is_causal=p.causal, enable_gqa=gqa),
    }
    with torch.inference_mode():
        outs = {name: fn() for name, fn in sides.items()}  # warm-up: builds, lookups
        ours = outs["op"].float()
        assert torch.allclose(ours, outs["torch"].float(), atol=5e-3, rtol=1e-2)
        assert torch.allclose(ours.transpose(1, 2), torch.from_numpy(outs["sdpa()"]).float())
        per_round: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(rounds):
            for name, fn in sides.items():
                per_round[name].append(_median_call(fn, calls))
    return {name: statistics.median(ts) for name, ts in per_round.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="timed calls per side per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--tuned", action="store_true",
                        help="launch the stored best configs instead of the family defaults")
    args = parser.parse_args()
    config = None if args.tuned else "default"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{args.rounds} rounds x {args.calls} calls per side; "
          f"{'tuned' if args.tuned else 'family default'} configs")
    sides = ("op", "op copy", "sdpa()", "torch", "torch bhsd")
    print(f"{'shape (batch 1)':<40}" + "".join(f"{s:>11}" for s in sides)
          + f"{'sdpa()/op':>10}{'torch/op':>10}")
    for p in SHAPES:
        t = run_shape(p, args.calls, args.rounds, config)
        torch_best = min(t["torch"], t["torch bhsd"])
        print(f"{_label(p):<40}" + "".join(f"{_fmt(t[s]):>11}" for s in sides)
              + f"{t['sdpa()'] / t['op']:>10.2f}{torch_best / t['op']:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
