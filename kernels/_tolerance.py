"""Per-dtype error thresholds and the output check every measurement and test goes through."""

from __future__ import annotations

import math

import numpy as np

from xe2tune.kernels._problem import ProblemSpec
from xe2tune.measurement import CorrectnessReport

# (max abs error, relative L2 error) against the float64 reference with unit-variance inputs.
# Dominated by the rounding of the output itself (fp16: 2^-11, bf16: 2^-8 relative) on values of
# magnitude up to ~4; fp32 by exp2 and accumulation order. Observed errors sit well below these.
# FP8 K/V problems are held to Q/O's dtype's thresholds: the reference takes exactly the FP8
# values the kernel reads, dequantized in float64, so what remains is the kernel's arithmetic and
# the output's rounding, not FP8's quantization error (observed e4m3/e5m2: max abs 1e-4 with
# fp16 Q/O, 3e-3 with bf16, as without FP8).
THRESHOLDS: dict[str, tuple[float, float]] = {
    "fp32": (1e-4, 1e-5),
    "fp16": (4e-3, 1e-3),
    "bf16": (3e-2, 8e-3),
}


def check_output(problem: ProblemSpec, out: np.ndarray, reference: np.ndarray) -> CorrectnessReport:
    """Compare a kernel output with the reference: non-finite count first, then the errors.

    Any NaN or Inf (e.g. an element the kernel never wrote over the NaN poison) fails the check
    and reports infinite errors, so no threshold can pass it.
    """
    atol, rtol = THRESHOLDS[problem.dtype]
    got = np.asarray(out).astype(np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference's {ref.shape}")
    nonfinite = int(np.count_nonzero(~np.isfinite(got)))
    if nonfinite:
        return CorrectnessReport(nonfinite, math.inf, math.inf, atol, rtol)
    diff = got - ref
    ref_norm = float(np.linalg.norm(ref))
    rel = float(np.linalg.norm(diff)) / ref_norm if ref_norm > 0 else float(np.linalg.norm(diff))
    return CorrectnessReport(0, float(np.abs(diff).max(initial=0.0)), rel, atol, rtol)
