"""The roofline model of SDPA: exact work counts and the achieved fraction of the roof.

Pure functions of the problem, so tests check them against hand calculations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xe2tune.harness._peaks import DevicePeaks
from xe2tune.kernels import ELEMENT_BYTES, ProblemSpec
from xe2tune.measurement import RooflineFigures


@dataclass(frozen=True)
class SdpaWork:
    """FLOPs of the two products and bytes per tensor for one problem."""

    flops_qk: float
    flops_pv: float
    bytes_q: float
    bytes_k: float
    bytes_v: float
    bytes_o: float

    @property
    def flops(self) -> float:
        return self.flops_qk + self.flops_pv

    @property
    def bytes(self) -> float:
        return self.bytes_q + self.bytes_k + self.bytes_v + self.bytes_o

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes


def visible_pairs(q_len: int, kv_len: int, causal: bool) -> int:
    """(query, key) pairs that are not masked, with the bottom-right causal alignment.

    Query i sees keys 0 .. i + kv_len - q_len (clipped to [0, kv_len]).
    """
    if not causal:
        return q_len * kv_len
    seen = np.arange(q_len, dtype=np.int64) + (kv_len - q_len + 1)
    return int(np.clip(seen, 0, kv_len).sum())


def sdpa_work(problem: ProblemSpec) -> SdpaWork:
    """Exact work: 2 FLOPs per multiply-add over visible pairs, each tensor moved once (K in
    D, V in Dv columns, both of the K/V element's size: one byte for FP8).

    Softmax exponentials are not counted (the convention of FlashAttention and SYCL*TLA
    reports), so TFLOP/s compare directly with theirs.
    """
    pairs = visible_pairs(problem.q_len, problem.kv_len, problem.causal)
    per_head = problem.batch * problem.heads_q * pairs
    e = ELEMENT_BYTES[problem.dtype]
    e_kv = ELEMENT_BYTES[problem.kv_element_dtype]  # FP8 K/V: one byte each
    q_elems = problem.batch * problem.q_len * problem.heads_q * problem.head_dim
    kv_rows = problem.batch * problem.kv_len * problem.heads_kv
    o_elems = problem.batch * problem.q_len * problem.heads_q * problem.head_dim_v
    return SdpaWork(
        flops_qk=2.0 * per_head * problem.head_dim,
        flops_pv=2.0 * per_head * problem.head_dim_v,
        bytes_q=float(q_elems * e),
        bytes_k=float(kv_rows * problem.head_dim * e_kv),
        bytes_v=float(kv_rows * problem.head_dim_v * e_kv),
        bytes_o=float(o_elems * e),
    )


class RooflineModel:
    """Achieved fraction of min(peak compute, AI x peak bandwidth) for a device's peaks."""

    def __init__(self, peaks: DevicePeaks) -> None:
        self.peaks = peaks

    def figures(self, problem: ProblemSpec, seconds: float) -> RooflineFigures:
        work = sdpa_work(problem)
        return self.figures_for(work.flops, work.bytes, problem.dtype, seconds)

    def figures_for(
        self, flops: float, nbytes: float, dtype: str, seconds: float
    ) -> RooflineFigures:
        """Figures for any kernel of known work (the ceilings' microkernels use this too)."""
        if seconds <= 0:
            raise ValueError("time must be positive")
        ai = flops / nbytes
        peak_flops = self.peaks.peak_flops(dtype)
        attainable = min(peak_flops, ai * self.peaks.bandwidth)
        achieved = flops / seconds
        return RooflineFigures(
            flops=flops,
            bytes=nbytes,
            arithmetic_intensity=ai,
            achieved_flops=achieved,
            achieved_bandwidth=nbytes / seconds,
            peak_flops=peak_flops,
            peak_bandwidth=self.peaks.bandwidth,
            attainable_flops=attainable,
            roofline_fraction=achieved / attainable,
            peak_source=self.peaks.source,
        )
