"""What the operator runs, and the one error naming it for everything else."""

from __future__ import annotations

from functools import lru_cache

import torch

from xe2tune.errors import InvalidProblem
from xe2tune.harness import device_caps
from xe2tune.kernels import HEAD_DIMS, HEAD_DIMS_V, family_for
from xe2tune.torch._launch import DTYPES, KV_DTYPES, cpu_queue, piece_problem, pieces

SUPPORTED = (
    "xe2tune's operator supports CPU tensors [batch, heads, seq, head_dim] of one dtype "
    "(float16, bfloat16, float32), or float16/bfloat16 query with float8_e4m3fn or float8_e5m2 "
    "key and value (scaled by k_scale/v_scale), query/key head dim "
    + "/".join(map(str, HEAD_DIMS)) + ", value head dim " + "/".join(map(str, HEAD_DIMS_V))
    + ", attn_mask=None, dropout_p=0.0, "
    "query heads equal to key/value heads or a multiple of them with enable_gqa=True, "
    "and no autograd; pass fallback=True to run torch's own implementation instead"
)


def unsupported(reason: str) -> InvalidProblem:
    """The error for arguments outside :data:`SUPPORTED`, saying which and what is supported."""
    return InvalidProblem(f"xe2tune.torch.scaled_dot_product_attention: {reason}. {SUPPORTED}")


def argument_reason(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attn_mask: torch.Tensor | None, dropout_p: float,
                    enable_gqa: bool) -> str | None:
    """Why torch-level arguments are outside the operator, or None.

    Reads tensor metadata only, so torch.compile traces it into guards, not a graph break.
    """
    if attn_mask is not None:
        return "attn_mask is not supported (use is_causal for a causal mask)"
    if dropout_p != 0.0:
        return f"dropout_p={dropout_p} is not supported"
    tensors = {"query": query, "key": key, "value": value}
    for name, t in tensors.items():
        if t.dim() != 4:
            return f"{name} has {t.dim()} dimensions, not 4"
        if t.device.type != "cpu":
            return (f"{name} is on {t.device}: this build runs CPU tensors only (XPU tensors "
                    "would need torch's SYCL queue, untested here)")
        if t.dtype not in DTYPES and not (name != "query" and t.dtype in KV_DTYPES):
            return f"{name} is {t.dtype}"
    fp8 = key.dtype in KV_DTYPES
    if key.dtype != value.dtype or (query.dtype != key.dtype and not fp8):
        return f"dtypes differ: {query.dtype}, {key.dtype}, {value.dtype}"
    if fp8 and query.dtype == torch.float32:
        return f"{key.dtype} key/value need a float16 or bfloat16 query, not {query.dtype}"
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors.values()):
        return "inputs require grad and the operator has no backward"
    if key.shape[:3] != value.shape[:3]:
        return (f"key {tuple(key.shape)} and value {tuple(value.shape)} differ in batch, heads "
                "or length")
    if query.shape[0] != key.shape[0] or query.shape[3] != key.shape[3]:
        return f"query {tuple(query.shape)} and key {tuple(key.shape)} differ in batch or head dim"
    heads_q, heads_kv = query.shape[1], key.shape[1]
    if heads_q != heads_kv and not (enable_gqa and heads_q % heads_kv == 0):
        return (f"{heads_q} query heads over {heads_kv} key/value heads"
                + ("" if enable_gqa else " without enable_gqa=True"))
    return None


@torch.compiler.assume_constant_result
def kernel_reason(shape_q: tuple[int, ...], shape_k: tuple[int, ...], dtype: str,
                  causal: bool, head_dim_v: int, kv_dtype: str | None) -> str | None:
    """Why the kernels cannot run a call of these [b, h, s, d] shapes here, or None.

    Answered once per shape per process. torch.compile calls it while tracing (its arguments
    are the static shapes) and keeps the answer as a constant, so the device query never
    reaches the graph.
    """
    return _kernel_reason(shape_q, shape_k, dtype, causal, head_dim_v, kv_dtype)


@lru_cache(maxsize=512)  # under the constant marker: dynamo cannot call an lru_cache wrapper
def _kernel_reason(shape_q: tuple[int, ...], shape_k: tuple[int, ...], dtype: str,
                   causal: bool, head_dim_v: int, kv_dtype: str | None) -> str | None:
    b, h, s, d = shape_q
    q = (b, s, h, d)
    k = (shape_k[0], shape_k[2], shape_k[1], shape_k[3])
    try:
        caps = device_caps(cpu_queue().sycl_device)
        for piece in pieces(s, k[1], causal):
            family_for(piece_problem(q, k, dtype, piece, head_dim_v, kv_dtype), caps)
    except InvalidProblem as exc:
        return str(exc)
    return None
