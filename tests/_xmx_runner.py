"""Runs xmx-family correctness cases in a process whose OpenCL CPU runtime allows subgroup 16.

The xmx kernels require subgroup size 16, which the OpenCL CPU runtime only builds when it
starts with ``CL_CONFIG_CPU_VECTORIZER_MODE=0`` (read once, at load), while the test session
runs with mode 1 for the vector-lane families. ``tests/kernels/test_xmx_correctness.py`` starts this
module with mode 0: a JSON list of cases on stdin, a JSON list of results on stdout, one per
case and in order. Builds are shared by the in-process program cache (one per config, head dim
and dtype).

A case: {"family": name, "problem": ProblemSpec.to_dict(), "params": {...} | null (default),
"seed": int}. A result: {"config", "passed", "nonfinite", "max_abs", "rel_l2",
"build_seconds", "error"} (error: the one-line reason when the case could not run).
"""

from __future__ import annotations

import json
import sys
import time

import xe2tune  # noqa: F401  (sets the runtime environment before dpctl loads)
from xe2tune.errors import Xe2TuneError
from xe2tune.harness import PlanExecutor, device_caps, open_queue
from xe2tune.kernels import ProblemSpec, build_program, check_output, make_inputs, reference_sdpa
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
        inputs = make_inputs(problem, seed=case.get("seed", 0))
        buffers = executor.allocate(*inputs)
        executor.launch_and_wait(buffers)
        report = check_output(problem, executor.read_output(buffers),
                              reference_sdpa(problem, *inputs))
    except Xe2TuneError as exc:
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return result
    result.update(passed=report.passed, nonfinite=report.nonfinite, max_abs=report.max_abs_error,
                  rel_l2=report.rel_l2_error)
    return result


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
