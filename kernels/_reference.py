"""The numpy reference SDPA: float64 accumulation, bottom-right aligned causal mask."""

from __future__ import annotations

import numpy as np

from xe2tune.kernels._problem import ProblemSpec


def reference_sdpa(
    problem: ProblemSpec, q: np.ndarray, k: np.ndarray, v: np.ndarray,
    kv_scale: np.ndarray | None = None, *, scale: float | None = None,
) -> np.ndarray:
    """softmax(scale * Q K^T + mask) V in float64, shape [B, q_len, Hq, Dv].

    FP8 K/V (``kv_scale`` [2, Hkv]: K's then V's scale per KV head) are dequantized first, in
    float64: the reference of the values the kernel was given, not of what was quantized.

    Query i sees keys 0 .. i + kv_len - q_len when causal (FlashAttention 2's alignment); a row
    that sees no key at all (causal with q_len > kv_len) is 0, as the kernels write it.
    Computed one (batch, KV head) at a time so memory stays at G * q_len * kv_len doubles.
    """
    scale = problem.scale if scale is None else float(scale)
    g = problem.group_size
    out = np.empty((problem.batch, problem.q_len, problem.heads_q, problem.head_dim_v))
    visible = None
    if problem.causal:
        rows = np.arange(problem.q_len)[:, None] + (problem.kv_len - problem.q_len)
        visible = np.arange(problem.kv_len)[None, :] <= rows  # [q_len, kv_len]
    for b in range(problem.batch):
        for h in range(problem.heads_kv):
            qh = q[b, :, h * g:(h + 1) * g, :].astype(np.float64)  # [q_len, G, D]
            kh = k[b, :, h, :].astype(np.float64)  # [kv_len, D]
            vh = v[b, :, h, :].astype(np.float64)  # [kv_len, Dv]
            if kv_scale is not None:
                kh = kh * float(kv_scale[0, h])
                vh = vh * float(kv_scale[1, h])
            s = np.einsum("qgd,kd->gqk", qh, kh) * scale
            if visible is not None:
                s = np.where(visible[None], s, -np.inf)
            m = s.max(axis=-1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0.0)
            p = np.exp(s - m)
            denom = p.sum(axis=-1, keepdims=True)
            o = np.einsum("gqk,kd->gqd", p, vh) / np.where(denom > 0, denom, 1.0)
            out[b, :, h * g:(h + 1) * g, :] = o.transpose(1, 0, 2)
    return out
