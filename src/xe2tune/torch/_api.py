"""``xe2tune.torch.scaled_dot_product_attention``: torch's signature over xe2tune's operator."""

from __future__ import annotations

import torch

from xe2tune._tuned import ConfigChoice
from xe2tune.torch._launch import DTYPES, encode_config
from xe2tune.torch._op import sdpa_op
from xe2tune.torch._support import argument_reason, kernel_reason, unsupported

# Bound at import, before any routing: the fallback must reach torch's own implementation.
_torch_sdpa = torch.nn.functional.scaled_dot_product_attention


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    fallback: bool = False,
    config: ConfigChoice = None,
) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention computed by xe2tune's tuned kernels.

    query [batch, heads_q, q_len, D], key and value [batch, heads_kv, kv_len, D] on the CPU,
    one of float16, bfloat16, float32; ``enable_gqa`` lets heads_q be a multiple of heads_kv
    (query head j reads key/value head j // (heads_q / heads_kv), as torch). ``is_causal`` is
    aligned top-left as torch aligns it (query i sees keys 0 .. i). The kernels read the
    tensors in place when ``t.transpose(1, 2)`` is contiguous and 64-byte aligned, else a copy.
    Returns [batch, heads_q, q_len, D] on the inputs' device, a view of [b, q_len, h, D] memory.

    ``config``: None launches the stored best config for the problem on this device (exact,
    else nearest, as ``xe2tune best`` answers; looked up once per problem), falling back to the
    family default; ``"default"``, a LauncherConfig or its JSON dict force one.
    ``fallback=True`` runs torch's own implementation for arguments the operator does not
    support instead of raising.

    Raises:
        InvalidProblem: for unsupported arguments, naming them and what is supported.
        InvalidConfig: if ``config`` cannot run on this problem.
        KernelCompileError: if the runtime compiler rejects the kernel.
    """
    reason = argument_reason(query, key, value, attn_mask, dropout_p, enable_gqa)
    if reason is None:
        reason = kernel_reason(tuple(query.shape), tuple(key.shape), DTYPES[query.dtype],
                               bool(is_causal))
    if reason is not None:
        if fallback:
            return _torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                               is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        raise unsupported(reason)
    return sdpa_op(query, key, value, bool(is_causal), None if scale is None else float(scale),
                   encode_config(config))
