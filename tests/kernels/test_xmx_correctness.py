"""The xmx families (their emulated Xe built-ins) against the float64 reference on opencl:cpu.

The kernels require subgroup size 16, which the OpenCL CPU runtime builds only when started with
CL_CONFIG_CPU_VECTORIZER_MODE=0 (read once, at load) while this session runs with 1, so the grid
runs in two child processes (``tests/_xmx_runner.py``) started with 0, each building its half of
the configs once; every case is then asserted here. The grid: head dims 64/96/128/192/256 x
fp16/bf16 with the family default on this device, q_len != kv_len, lengths 1/17/129/1000, GQA
ratios 1/4/8, causal (including q_len > kv_len: rows that see no key output 0) and not,
batch 2, decode q_len 1/5/16, latent attention (D 192 / Dv 128 prefill, D 576 / Dv 512 decode
with one KV head for 8 to 32 query heads, V's columns in one work-group or split among 2 or 4),
FP8 K/V (e4m3, e5m2; fp16 and bf16 Q), and non-default configs (sg_k 2 and 4, VTILES 1 to 8,
stages 0 and 2, 4 row fragments per subgroup). Beside the grid, the FP8 builds run two keys whose
winning V row holds every finite bit pattern of the format, which must come out bit for bit
(``test_fp8_loaders_read_every_finite_pattern_exactly``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from xe2tune.config import child_runtime_env
from xe2tune.kernels import ProblemSpec

pytestmark = pytest.mark.requires_xpu

RUNNER = Path(__file__).parents[1] / "_xmx_runner.py"
WORKERS = 2
TIMEOUT_S = 1800


def P(mode, d, dtype, q_len, kv_len, hq, hkv, causal=False, batch=1, dv=None,  # noqa: N802
      kv=None):
    return ProblemSpec(mode, d, dtype, q_len, kv_len, heads_q=hq, heads_kv=hkv, batch=batch,
                       causal=causal, head_dim_v=dv, kv_dtype=kv)


# (build label, params or None for the family default, problems sharing that build)
DEFAULT_BUILDS = [
    ("prefill-64-fp16", None, [P("prefill", 64, "fp16", 17, 40, 4, 4),
                               P("prefill", 64, "fp16", 129, 77, 8, 1, causal=True, batch=2)]),
    ("prefill-64-bf16", None, [P("prefill", 64, "bf16", 1000, 129, 4, 1, causal=True)]),
    ("prefill-96-fp16", None, [P("prefill", 96, "fp16", 129, 1000, 8, 2, causal=True)]),
    ("prefill-96-bf16", None, [P("prefill", 96, "bf16", 17, 17, 4, 4, causal=True, batch=2)]),
    ("prefill-128-fp16", None, [P("prefill", 128, "fp16", 1000, 129, 8, 2),
                                P("prefill", 128, "fp16", 17, 1, 4, 4, causal=True),
                                P("prefill", 128, "fp16", 1, 1000, 8, 1)]),
    ("prefill-128-bf16", None, [P("prefill", 128, "bf16", 129, 1000, 8, 8, causal=True)]),
    ("prefill-192-fp16", None, [P("prefill", 192, "fp16", 77, 301, 4, 1, causal=True)]),
    ("prefill-192-bf16", None, [P("prefill", 192, "bf16", 129, 17, 8, 2, batch=2)]),
    ("prefill-256-fp16", None, [P("prefill", 256, "fp16", 17, 1000, 4, 1)]),
    ("prefill-256-bf16", None, [P("prefill", 256, "bf16", 129, 129, 8, 1, causal=True,
                                  batch=2)]),
    ("decode-128-fp16", None, [P("decode", 128, "fp16", 1, 1000, 8, 8),
                               P("decode", 128, "fp16", 1, 129, 32, 8),
                               P("decode", 128, "fp16", 16, 17, 8, 1, causal=True),
                               P("decode", 128, "fp16", 5, 1000, 16, 2, causal=True, batch=2)]),
    ("decode-64-bf16", None, [P("decode", 64, "bf16", 1, 1, 4, 4),
                              P("decode", 64, "bf16", 5, 129, 8, 1, causal=True)]),
    ("decode-256-bf16", None, [P("decode", 256, "bf16", 16, 1000, 8, 8, causal=True)]),
    # latent attention: MLA prefill D 192 / Dv 128, absorbed MLA decode D 576 / Dv 512 with one
    # shared latent K/V head (here the default keeps V's columns in one work-group; on Xe2 it
    # splits them: below, and tests/kernels/test_xe2_kernels_isa.py)
    ("prefill-192-128-fp16", None, [P("prefill", 192, "fp16", 129, 301, 8, 2, causal=True,
                                      dv=128),
                                    P("prefill", 192, "fp16", 17, 40, 4, 4, dv=128)]),
    ("prefill-192-128-bf16", None, [P("prefill", 192, "bf16", 77, 129, 4, 1, causal=True,
                                      batch=2, dv=128)]),
    ("decode-576-512-bf16", None, [P("decode", 576, "bf16", 1, 1000, 16, 1, dv=512),
                                   P("decode", 576, "bf16", 2, 129, 16, 1, causal=True,
                                     dv=512)]),
    # FP8 K/V (per-KV-head scales from make_inputs), converted to Q's dtype after the load
    ("prefill-64-fp16-e4m3", None, [P("prefill", 64, "fp16", 40, 77, 4, 2, causal=True,
                                      kv="e4m3")]),
    ("prefill-128-bf16-e5m2", None, [P("prefill", 128, "bf16", 129, 50, 4, 4, batch=2,
                                       kv="e5m2")]),
    ("decode-128-bf16-e4m3", None, [P("decode", 128, "bf16", 1, 1000, 8, 2, kv="e4m3")]),
    ("decode-64-fp16-e5m2", None, [P("decode", 64, "fp16", 5, 129, 8, 1, causal=True,
                                     kv="e5m2")]),
]
NON_DEFAULT_BUILDS = [
    # 4 row fragments and 2 key fragments per subgroup, 2 x 2 subgroups, VTILES 8, no prefetch
    ("prefill-sgk2-vtiles8", dict(bq=64, bk=64, bd=16, bv=16, sg_q=2, sg_k=2, stages=0,
                                  grf=128),
     [P("prefill", 128, "fp16", 129, 1000, 8, 2, causal=True),
      P("prefill", 128, "fp16", 1000, 17, 4, 4)]),
    # 16 subgroups (4 x 4: three combine rounds), BD = D, one V split, 2 blocks prefetched
    ("prefill-sgk4-vtiles1", dict(bq=32, bk=128, bd=64, bv=64, sg_q=4, sg_k=4, stages=2,
                                  grf=128),
     [P("prefill", 64, "bf16", 129, 1000, 8, 1, causal=True),
      P("prefill", 64, "bf16", 17, 300, 4, 2, batch=2)]),
    # two row tiles of two subgroups along rows, short chunks, 2 blocks prefetched
    ("decode-sgq2-chunks", dict(bq=16, bk=16, bd=16, bv=32, sg_q=2, sg_k=1, stages=2, grf=128,
                                kv_chunk=256),
     [P("decode", 128, "bf16", 5, 1000, 32, 4, causal=True),
      P("decode", 128, "bf16", 1, 129, 8, 8)]),
    # latent decode with V's 512 columns split among 2 (2 x 2 subgroups) and 4 work-groups
    ("decode-576-512-dvsplit2", dict(bq=16, bk=32, bd=64, bv=32, sg_q=2, sg_k=2, stages=1,
                                     grf=128, kv_chunk=256, dv_splits=2),
     [P("decode", 576, "bf16", 1, 1000, 16, 1, dv=512),
      P("decode", 576, "fp16", 2, 129, 32, 1, causal=True, dv=512)]),
    ("decode-576-512-dvsplit4", dict(bq=8, bk=64, bd=32, bv=64, sg_q=1, sg_k=2, stages=2,
                                     grf=128, kv_chunk=128, dv_splits=4),
     [P("decode", 576, "fp16", 1, 300, 16, 1, dv=512, kv="e4m3"),
      P("decode", 576, "bf16", 5, 129, 8, 1, causal=True, batch=2, dv=512)]),
]
BUILDS = DEFAULT_BUILDS + NON_DEFAULT_BUILDS
# (build label, problem): the FP8 builds above (the same configs: lengths and heads of the same
# group size do not change them) on two keys, one of which wins exactly and holds every finite
# pattern (tests/_xmx_runner.py, "fp8_patterns"), both modes, both formats, fp16 and bf16 Q.
PATTERN_CASES = [
    ("prefill-64-fp16-e4m3", P("prefill", 64, "fp16", 40, 2, 8, 8, kv="e4m3")),
    ("prefill-128-bf16-e5m2", P("prefill", 128, "bf16", 17, 2, 4, 4, kv="e5m2")),
    ("decode-128-bf16-e4m3", P("decode", 128, "bf16", 1, 2, 16, 4, kv="e4m3")),
    ("decode-64-fp16-e5m2", P("decode", 64, "fp16", 5, 2, 64, 8, kv="e5m2")),
]


def _cases() -> list[tuple[str, int, dict]]:
    """(case id, worker, runner case) for every problem of every build."""
    cases = []
    for index, (label, params, problems) in enumerate(BUILDS):
        for problem in problems:
            case_id = f"{label}:{problem.key()}"
            cases.append((case_id, index % WORKERS, {
                "family": f"sdpa_xmx_{problem.mode}", "problem": problem.to_dict(),
                "params": params, "seed": len(cases)}))
    labels = [label for label, _, _ in BUILDS]
    for label, problem in PATTERN_CASES:  # on the worker that has their build
        cases.append((f"patterns:{label}:{problem.key()}", labels.index(label) % WORKERS, {
            "family": f"sdpa_xmx_{problem.mode}", "problem": problem.to_dict(), "params": None,
            "inputs": "fp8_patterns"}))
    return cases


CASES = _cases()


def _run_worker(cases: list[dict]) -> list[dict]:
    env = child_runtime_env("0")  # with mode 0's own persistent kernel cache
    proc = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(cases), env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def grid_results() -> dict[str, dict]:
    """Every case's result, by case id (both workers run concurrently, one build per config)."""
    by_worker = [[c for c in CASES if c[1] == w] for w in range(WORKERS)]
    with ThreadPoolExecutor(WORKERS) as pool:
        outputs = list(pool.map(lambda cs: _run_worker([c[2] for c in cs]), by_worker))
    results = {}
    for cases, output in zip(by_worker, outputs, strict=True):
        assert len(output) == len(cases)
        results.update({case_id: r for (case_id, _, _), r in zip(cases, output, strict=True)})
    return results


@pytest.mark.parametrize("case_id", [c[0] for c in CASES if "inputs" not in c[2]])
def test_emulated_builtins_match_reference(grid_results, case_id):
    result = grid_results[case_id]
    assert result["error"] is None, (case_id, result)
    assert result["passed"], (case_id, result)


@pytest.mark.parametrize("case_id", [c[0] for c in CASES if "inputs" in c[2]])
def test_fp8_loaders_read_every_finite_pattern_exactly(grid_results, case_id):
    # The FP8 loaders' bit conversions (kernels/sdpa_xmx_fp8.hpp, the same code Xe2 compiles),
    # value by value: signs, subnormals, the largest values, e4m3's 2^-8 rebias.
    result = grid_results[case_id]
    assert result["error"] is None, (case_id, result)
    assert result["passed"] and result["nonfinite"] == 0, (case_id, result)


def test_grid_covers_what_it_claims():
    """The grid really holds the shapes the module docstring lists (a guard against edits)."""
    problems = [ProblemSpec.from_dict(c[2]["problem"]) for c in CASES if "inputs" not in c[2]]
    assert {p.head_dim for p in problems} == {64, 96, 128, 192, 256, 576}
    assert {(p.head_dim, p.head_dim_v) for p in problems if p.is_mla} == {(192, 128), (576, 512)}
    assert any(p.is_mla and p.heads_kv == 1 and p.heads_q == 16 for p in problems)
    assert {(p.mode, p.kv_dtype) for p in problems if p.kv_dtype} == {
        (m, k) for m in ("prefill", "decode") for k in ("e4m3", "e5m2")}
    assert {p.dtype for p in problems} == {"fp16", "bf16"}
    assert {p.group_size for p in problems} >= {1, 4, 8}
    assert {p.q_len for p in problems if p.mode == "decode"} >= {1, 5, 16}
    assert {1, 17, 129, 1000} <= {p.q_len for p in problems} | {p.kv_len for p in problems}
    assert any(p.causal and p.q_len > p.kv_len for p in problems)
    assert any(p.batch == 2 for p in problems)
    sg_k = {c[2]["params"]["sg_k"] for c in CASES if c[2]["params"]}
    stages = {c[2]["params"]["stages"] for c in CASES if c[2]["params"]}
    assert {2, 4} <= sg_k and {0, 2} <= stages
    assert {c[2]["params"].get("dv_splits") for c in CASES if c[2]["params"]} >= {2, 4}
