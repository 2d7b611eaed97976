"""The xmx family through Intel's Xe2 compiler on a sample: crashes, errors, spills against the
register model, DPAS and 2D loads against the model's counts.

Usage: python benchmarks/xe2_compile_sample.py [--per-group N] [--seed S] [--targets bmg,lnl-m]
       [--head-dims 64,128] [--dtypes fp16,bf16] [--json FILE]

For each mode (prefill, decode), head dim and dtype, on the B580's description: the seeded
baselines the family accepts, its default, and N random configs drawn from those every rule but
the register model accepts (their fragments alone fit the register file: the model then decides
whether the rest does). Each is captured as SPIR-V through the run-time compiler and compiled by
Intel's Xe2 compiler (scripts/install-xe2-compiler) for each target. Prints per group how many
modules compiled, crashed or failed, the register model's verdicts against IGC's (accepted and
spill-free, accepted but spilling: a model bug, rejected though spill-free, rejected and
spilling), and how many main kernels hold the modelled DPAS and 2D K/V loads; then the ISA rows
of the baselines and defaults. Nothing runs on a GPU: these are compile-time facts for that GPU.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter

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


def fragments_only(family):
    """The family with the register model cut down to the fragments' hard bound: it accepts
    the configs the model is judged on (the real family still gives each its verdict)."""

    class FragmentsOnly(type(family)):
        register_footprint = staticmethod(type(family).fragment_registers)

    return FragmentsOnly()


def picks(family, problem, caps, per_group: int, rng: random.Random):
    chosen = [(b.label, b.config) for b in family.baselines(problem, caps)
              if family.invalid_reason(b.config, problem, caps) is None]
    chosen.append(("default", family.default_config(problem, caps)))
    pool = list(fragments_only(family).valid_configs(problem, caps))
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
    records, totals, started = [], Counter(), time.perf_counter()
    print(f"{'group':<20} {'pool':>5} {'built':>5} {'compiled':>8} {'crashed':>7} {'errors':>6}"
          f" {'acc+ok':>6} {'acc+SPILL':>9} {'rej+ok':>6} {'rej+spill':>9} {'dpas ok':>7} "
          f"{'2D K/V ok':>9}")
    for mode in ("prefill", "decode"):
        family = get_family(f"sdpa_xmx_{mode}")
        loose = fragments_only(family)
        for head_dim in map(int, args.head_dims.split(",")):
            for dtype in args.dtypes.split(","):
                problem = problem_of(mode, head_dim, dtype)
                rng = random.Random(f"{args.seed}:{mode}:{head_dim}:{dtype}")
                chosen, pool = picks(family, problem, caps, args.per_group, rng)
                group = Counter()
                for label, config in chosen:
                    accepted = family.invalid_reason(config, problem, caps) is None
                    capture = capture_spirv(loose.plan(config, problem, caps),
                                            timeout_s=TIMEOUT_S)
                    modules = compile_isa_all(
                        [IsaJob(image, module, target) for target in targets
                         for image, module in zip(capture.images, capture.modules, strict=True)],
                        timeout_s=TIMEOUT_S)
                    spills = False
                    for m in modules:
                        group["compiled"] += m.verdict is Verdict.COMPILED
                        group["crashed"] += m.verdict is Verdict.CRASHED
                        group["errors"] += m.verdict in (Verdict.ERROR, Verdict.TIMEOUT)
                        for k in m.kernels:
                            spills |= bool(k.spill_bytes or k.private_bytes)
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
                    group[("acc" if accepted else "rej") + ("_spill" if spills else "_ok")] += 1
                    records.append({"mode": mode, "head_dim": head_dim, "dtype": dtype,
                                    "label": label, "config": config.to_dict(),
                                    "model_accepts": accepted,
                                    "model_registers": family.register_footprint(config, problem),
                                    "fragment_registers": family.fragment_registers(config,
                                                                                    problem),
                                    "isa": [m.to_dict() for m in modules]})
                totals.update(group)
                name = f"{mode} hd{head_dim} {dtype}"
                print(f"{name:<20} {pool:>5} {len(chosen):>5} {group['compiled']:>8} "
                      f"{group['crashed']:>7} {group['errors']:>6} {group['acc_ok']:>6} "
                      f"{group['acc_spill']:>9} {group['rej_ok']:>6} {group['rej_spill']:>9} "
                      f"{group['dpas_ok']:>3}/{group['kernels']:<3} "
                      f"{group['loads_ok']:>5}/{group['kernels']:<3}", flush=True)
    print(f"{'all':<20} {'':>5} {len(records):>5} {totals['compiled']:>8} {totals['crashed']:>7} "
          f"{totals['errors']:>6} {totals['acc_ok']:>6} {totals['acc_spill']:>9} "
          f"{totals['rej_ok']:>6} {totals['rej_spill']:>9} {totals['dpas_ok']:>3}/"
          f"{totals['kernels']:<3} {totals['loads_ok']:>5}/{totals['kernels']:<3}")
    print(f"\n(pool: configs whose fragments fit, every other rule met; built: baselines + "
          f"default + sample; compiled/crashed/errors count modules over {', '.join(targets)}; "
          f"acc/rej: the register model accepts/rejects, ok/spill: IGC allocated without / with "
          f"spill or private memory on any target; {time.perf_counter() - started:.0f} s)")
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
