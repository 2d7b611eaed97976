"""Xe2 ISA of the xmx decode with FP8 K/V next to the same decode with fp16/bf16 K/V.

Usage: python benchmarks/kv_isa.py [--target bmg] [--head-dim 128] [--dtype fp16]

Decode q_len 1, 8 query / 2 KV heads, kv 4096 (the ISA does not depend on the lengths), each
K/V dtype with its family default planned for a B580, compiled by Intel's Xe2 compiler (ocloc,
IGC; scripts/install-xe2-compiler) and counted by the ISA tooling (kernels/_isa*.py, as
`xe2tune inspect --isa`). For the K loop (the innermost loop holding every DPAS) it prints
instructions, DPAS, 2D block loads and other global loads, and the K/V bytes one subgroup loads
per iteration (its key share of K [keys, D] and V [keys, Dv]); "extra per byte" is the loop's
instructions beyond the fp16/bf16 kernel's, per K/V byte loaded: the cost of the FP8 loads and
their conversion to Q's dtype (Xe2's DPAS takes no FP8 operand).
"""

from __future__ import annotations

import argparse
import dataclasses

from xe2tune.kernels import (
    IsaJob,
    ProblemSpec,
    capture_spirv,
    catalog_device,
    compile_isa_all,
    locate_xe2_compiler,
)
from xe2tune.kernels._xmx_decode import XmxDecodeFamily

TIMEOUT_S = 900.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="bmg", help="ocloc device (bmg, lnl-m)")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    args = parser.parse_args()
    if locate_xe2_compiler().compiler is None:
        raise SystemExit("no Xe2 compiler: run scripts/install-xe2-compiler")
    caps = catalog_device("b580").caps
    family = XmxDecodeFamily()
    base = ProblemSpec("decode", args.head_dim, args.dtype, 1, 4096, heads_q=8, heads_kv=2)
    rows = []
    for kv in (None, "e4m3", "e5m2"):
        problem = dataclasses.replace(base, kv_dtype=kv)
        config = family.default_config(problem, caps)
        capture = capture_spirv(family.plan(config, problem, caps), timeout_s=TIMEOUT_S)
        report = compile_isa_all([IsaJob(capture.images[0], capture.modules[0], args.target)],
                                 timeout_s=TIMEOUT_S)[0]
        kernel = next(k for k in report.kernels if k.kernel == family.kernel_names[0])
        keys = config.bk // config.subgroup_layout[1]
        element = 1 if kv else 2
        loop_bytes = keys * (problem.head_dim + problem.head_dim_v) * element
        rows.append((kv or args.dtype, config, kernel, loop_bytes))
    print(f"xmx decode hd{args.head_dim} {args.dtype} Q/O, 8/2 heads, {args.target}")
    print(f"{'K/V':6} {'spill':>6} {'loop instr':>10} {'DPAS':>5} {'2D loads':>8} "
          f"{'global ld':>9} {'bytes/iter':>10} {'extra per byte':>14}  config")
    base_instr = rows[0][2].dpas_loop.instructions
    for name, config, kernel, loop_bytes in rows:
        loop = kernel.dpas_loop
        extra = (loop.instructions - base_instr) / loop_bytes
        print(f"{name:6} {kernel.spill_bytes:6} {loop.instructions:10} {loop.dpas:5} "
              f"{loop.block2d_loads:8} {loop.global_loads:9} {loop_bytes:10} {extra:14.2f}  "
              f"{config}")


if __name__ == "__main__":
    main()
