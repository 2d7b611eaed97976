"""The xmx family through Intel's Xe2 compiler on a sample: crashes, errors, spills, ISA.

Usage: python benchmarks/xe2_compile_sample.py [--per-group N] [--seed S] [--targets bmg,lnl-m]
       [--head-dims 64,128] [--dtypes fp16,bf16] [--json FILE]

For each mode (prefill, decode), head dim and dtype, on the B580's description: the seeded
baselines the family accepts, its default and N random configs the family calls valid (the
register model included), each captured as SPIR-V through the run-time compiler and compiled by
Intel's Xe2 compiler (scripts/install-xe2-compiler) for each target. Prints one row per group:
how many compiled, crashed or failed, how many the model accepted that spill anyway (each a
model bug), and the DPAS and 2D-load counts against the model's; then the ISA rows of the
baselines and defaults. Nothing runs on a GPU: these are compile-time facts for that GPU.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from xe2tune.kernels import (
    IsaJob,
    ProblemSpec,
    Verdict,
    capture_spirv,
    catalog_device,
    compile_isa_all,
    get_family,
)

TIMEOUT_S = 600.0


def problem_of(mode: str, head_dim: int, dtype: str) -> ProblemSpec:
    if mode == "prefill":
        return ProblemSpec("prefill", head_dim, dtype, 512, 512, heads_q=8, heads_kv=8)
    return ProblemSpec("decode", head_dim, dtype, 1, 4096, heads_q=8, heads_kv=2)


def picks(family, problem, caps, per_group: int, rng: random.Random):
    chosen = [(b.label, b.config) for b in family.baselines(problem, caps)
              if family.invalid_reason(b.config, problem, caps) is None]
    chosen.append(("default", family.default_config(problem, caps)))
    pool = list(family.valid_configs(problem, caps))
    chosen += [("sample", c) for c in rng.sample(pool, min(per_group, len(pool)))]
    return chosen, len(pool)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-group", type=int, default=30)
    ap.add_argument("--seed", default="validation")
    ap.add_argument("--targets", default="bmg,lnl-m")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--dtypes", default="fp16,bf16")
    ap.add_argument("--json", dest="json_path")
    args = ap.parse_args()
    caps = catalog_device("b580").caps
    targets = args.targets.split(",")
    records, started = [], time.perf_counter()
    print(f"{'group':<22} {'valid':>6} {'built':>5} {'compiled':>8} {'crashed':>7} "
          f"{'errors':>6} {'spill':>5} {'dpas=model':>10} {'2D K/V=model':>12}")
    for mode in ("prefill", "decode"):
        family = get_family(f"sdpa_xmx_{mode}")
        for head_dim in map(int, args.head_dims.split(",")):
            for dtype in args.dtypes.split(","):
                problem = problem_of(mode, head_dim, dtype)
                rng = random.Random(f"{args.seed}:{mode}:{head_dim}:{dtype}")
                chosen, valid = picks(family, problem, caps, args.per_group, rng)
                group = {"compiled": 0, "crashed": 0, "errors": 0, "spill": 0, "dpas_ok": 0,
                         "loads_ok": 0, "kernels": 0}
                for label, config in chosen:
                    capture = capture_spirv(family.plan(config, problem, caps),
                                            timeout_s=TIMEOUT_S)
                    modules = compile_isa_all(
                        [IsaJob(image, module, target) for target in targets
                         for image, module in zip(capture.images, capture.modules, strict=True)],
                        timeout_s=TIMEOUT_S)
                    for m in modules:
                        group["compiled"] += m.verdict is Verdict.COMPILED
                        group["crashed"] += m.verdict is Verdict.CRASHED
                        group["errors"] += m.verdict in (Verdict.ERROR, Verdict.TIMEOUT)
                        for k in m.kernels:
                            group["spill"] += bool(k.spill_bytes or k.private_bytes)
                            if k.kernel != family.kernel_names[0] or k.counts is None:
                                continue
                            nf = config.bk // config.subgroup_layout[1] // 16
                            forms = k.counts.block2d_loads_by_form
                            group["kernels"] += 1
                            group["dpas_ok"] += (
                                k.counts.dpas == family.expected_matrix_mads(config, problem))
                            group["loads_ok"] += (
                                forms.get("transposed") == nf * head_dim // 16
                                and forms.get("vnni") == nf * problem.head_dim_v // 16)
                    records.append({"mode": mode, "head_dim": head_dim, "dtype": dtype,
                                    "label": label, "config": config.to_dict(),
                                    "model_registers": family.register_footprint(config, problem),
                                    "isa": [m.to_dict() for m in modules]})
                name = f"{mode} hd{head_dim} {dtype}"
                print(f"{name:<22} {valid:>6} {len(chosen):>5} {group['compiled']:>8} "
                      f"{group['crashed']:>7} {group['errors']:>6} {group['spill']:>5} "
                      f"{group['dpas_ok']:>4}/{group['kernels']:<5} "
                      f"{group['loads_ok']:>5}/{group['kernels']:<6}", flush=True)
    print(f"\n(valid: configs the family accepts on the B580; built: baselines + default + "
          f"sample; compiled/crashed/errors count modules over {', '.join(targets)}; spill: "
          f"kernels with spill or private bytes; {time.perf_counter() - started:.0f} s)")
    print("\nBaselines and defaults (first target):")
    for r in records:
        if r["label"] == "sample":
            continue
        for m in r["isa"][:1]:
            for k in m["kernels"]:
                loop = k["dpas_loop"] or {}
                print(f"  {r['mode']} hd{r['head_dim']} {r['dtype']} {r['label']:<17} "
                      f"{k['kernel']:<24} GRF {k['grf_count']} thr/EU {k['threads_per_eu']} "
                      f"spill {k['spill_bytes']} DPAS {k['dpas']} 2D ld "
                      f"{k['block2d_loads_by_form']} pf {k['block2d_prefetches']} instr "
                      f"{k['instructions']} K loop {loop.get('instructions')} instr, global "
                      f"ld/st {loop.get('global_loads')}/{loop.get('global_stores')}")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
