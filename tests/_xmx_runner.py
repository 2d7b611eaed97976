"""Runs xmx-family correctness cases in a process whose OpenCL CPU runtime allows subgroup 16.

The xmx kernels require subgroup size 16, which the OpenCL CPU runtime only builds when it
starts with ``CL_CONFIG_CPU_VECTORIZER_MODE=0`` (read once, at load), while the test session
runs with mode 1 for the vector-lane families. ``tests/kernels/test_xmx_correctness.py`` starts this
module with mode 0: a JSON list of cases on stdin, a JSON list of results on stdout, one per
case and in order. Builds are shared by the in-process program cache (one per config, head dim
and dtype).

A case: {"family": name, "problem": ProblemSpec.to_dict(), "params": {...} | null (default),
"seed": int, "inputs": "random" (default) | "fp8_patterns"}. A result: {"config", "passed",
"nonfinite", "max_abs", "rel_l2", "build_seconds", "error"} (error: the one-line reason when the
case could not run).

"fp8_patterns" (FP8 K/V, kv_len 2, heads_kv / 2 x Dv >= 256): KV head h's key h % 2 has K
ones and the other key K at the format's most negative value, so with Q ones and unit scales
the first key's softmax weight is exactly 1 and the other's exactly 0: every output row is the
V row of its KV head's winning key, which holds finite bit patterns of the format (each pattern
once among the even heads, once among the odd ones; the other key's V row is 0). "passed" means
equal bit for bit: every finite FP8 value is exact in fp16, bf16 and the fp32 between, so this
checks the loaders' conversion value by value, for the first and the second key of a pair.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import xe2tune  # noqa: F401  (sets the runtime environment before dpctl loads)
from xe2tune.errors import Xe2TuneError
from xe2tune.harness import PlanExecutor, device_caps, open_queue
from xe2tune.kernels import (
    ProblemSpec,
    build_program,
    check_output,
    make_inputs,
    numpy_dtype,
    reference_sdpa,
)
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily

FAMILIES = {f.name: f for f in (XmxPrefillFamily(), XmxDecodeFamily())}


def run_case(queue, caps, case: dict) -> dict:
    family = FAMILIES[case["family"]]
    problem = ProblemSpec.from_dict(case["problem"])
    result: dict = {"config": None, "passed": False, "build_seconds": 0.0, "error": None}
    try:
        params = case.get("params")
        config = (family.config_from_params(problem, params) if params
                  else family.default_config(problem, caps))
        result["config"] = str(config)
        plan = family.plan(config, problem, caps)
        built = build_program(queue, plan.source_file, plan.kernel_names, plan.defines)
        result["build_seconds"] = built.build_seconds
        executor = PlanExecutor(queue, built, plan, problem)
        patterns = case.get("inputs") == "fp8_patterns"
        inputs = (fp8_pattern_inputs(problem) if patterns
                  else make_inputs(problem, seed=case.get("seed", 0)))
        buffers = executor.allocate(*inputs)
        executor.launch_and_wait(buffers)
        output = executor.read_output(buffers)
        if patterns:
            return {**result, **exact_rows(problem, output, inputs[2])}
        report = check_output(problem, output, reference_sdpa(problem, *inputs))
    except Xe2TuneError as exc:
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return result
    result.update(passed=report.passed, nonfinite=report.nonfinite, max_abs=report.max_abs_error,
                  rel_l2=report.rel_l2_error)
    return result


def fp8_pattern_inputs(problem: ProblemSpec) -> tuple[np.ndarray, ...]:
    """Q, K, V and unit scales of an "fp8_patterns" case (module docstring)."""
    fp8 = numpy_dtype(problem.kv_element_dtype)
    bits = np.arange(256, dtype=np.uint8)
    values = bits.view(fp8).astype(np.float32)
    finite = bits[np.isfinite(values)]
    heads, dv = problem.heads_kv, problem.head_dim_v
    assert problem.kv_len == 2 and heads % 2 == 0 and heads // 2 * dv >= finite.size, problem
    slots = np.zeros(heads // 2 * dv, dtype=np.uint8)
    slots[:finite.size] = finite
    v = np.zeros((1, 2, heads, dv), dtype=np.uint8)
    k = np.full((1, 2, heads, problem.head_dim), np.nanmin(values[finite]), dtype=np.float32)
    for h in range(heads):
        v[0, h % 2, h] = slots[h // 2 * dv:(h // 2 + 1) * dv]
        k[0, h % 2, h] = 1.0
    q = np.ones((1, problem.q_len, problem.heads_q, problem.head_dim),
                dtype=numpy_dtype(problem.dtype))
    return q, k.astype(fp8), v.view(fp8), np.ones((2, heads), dtype=np.float32)


def exact_rows(problem: ProblemSpec, output: np.ndarray, v: np.ndarray) -> dict:
    """Whether every output row is its KV head's winning V row, bit for bit, and the largest
    error."""
    winning = np.stack([v[0, h % 2, h] for h in range(problem.heads_kv)]).astype(np.float32)
    rows = np.repeat(winning, problem.group_size, axis=0)  # [Hq, Dv]
    got = output.astype(np.float32)
    expected = np.broadcast_to(rows, got.shape)
    return {"passed": bool(np.array_equal(got, expected)),
            "nonfinite": int((~np.isfinite(got)).sum()),
            "max_abs": float(np.nanmax(np.abs(got - expected))), "rel_l2": None}


def main() -> None:
    cases = json.load(sys.stdin)
    queue = open_queue("opencl:cpu")
    caps = device_caps(queue.sycl_device)
    results = []
    for case in cases:
        started = time.perf_counter()
        result = run_case(queue, caps, case)
        result["seconds"] = time.perf_counter() - started
        results.append(result)
        print(json.dumps({"progress": len(results), **result}), file=sys.stderr, flush=True)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
