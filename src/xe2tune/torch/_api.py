"""``xe2tune.torch.scaled_dot_product_attention``: torch's signature over xe2tune's operator."""

from __future__ import annotations

import torch

from xe2tune._tuned import ConfigChoice
from xe2tune.torch._launch import DTYPES, KV_DTYPES, encode_config
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
    k_scale: float | torch.Tensor = 1.0,
    v_scale: float | torch.Tensor = 1.0,
) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention computed by xe2tune's tuned kernels.

    query [batch, heads_q, q_len, D], key [batch, heads_kv, kv_len, D] and value [batch,
    heads_kv, kv_len, Dv] on the CPU (Dv may differ from D: latent attention), one of float16,
    bfloat16, float32; or key and value both torch.float8_e4m3fn / float8_e5m2 with a float16
    or bfloat16 query, dequantized as key * k_scale and value * v_scale (each a float or a
    [heads_kv] tensor; the scales are refused with other dtypes unless 1). ``enable_gqa`` lets
    heads_q be a multiple of heads_kv (query head j reads key/value head j // (heads_q /
    heads_kv), as torch). ``is_causal`` is aligned top-left as torch aligns it (query i sees
    keys 0 .. i). The kernels read the
    tensors in place when ``t.transpose(1, 2)`` is contiguous and 64-byte aligned, else a copy.
    Returns [batch, heads_q, q_len, Dv] on the inputs' device, a view of [b, q_len, h, Dv]
    memory, in query's dtype.

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
    kv_dtype = KV_DTYPES.get(key.dtype)
    kv_scale = None
    if reason is None:
        kv_scale, reason = kv_scales(k_scale, v_scale, key.shape[1], kv_dtype is not None)
    if reason is None:
        reason = kernel_reason(tuple(query.shape), tuple(key.shape), DTYPES[query.dtype],
                               bool(is_causal), value.shape[-1], kv_dtype)
    if reason is not None:
        if fallback and kv_dtype is None:
            return _torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                               is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        raise unsupported(reason)
    return sdpa_op(query, key, value, bool(is_causal), None if scale is None else float(scale),
                   encode_config(config), kv_scale)


def kv_scales(k_scale: float | torch.Tensor, v_scale: float | torch.Tensor, heads_kv: int,
              fp8: bool) -> tuple[torch.Tensor | None, str | None]:
    """kv_scale [2, heads_kv] float32 for FP8 key/value (None otherwise), or why the scales are
    refused. Without FP8 only the Python number 1 passes (no tensor value is read: a branch on
    one would break torch.compile's graph)."""
    if not fp8:
        if any(isinstance(x, torch.Tensor) or x != 1 for x in (k_scale, v_scale)):
            return None, "k_scale and v_scale dequantize float8 key/value; leave them at 1"
        return None, None
    rows = []
    for name, value in (("k_scale", k_scale), ("v_scale", v_scale)):
        scale = torch.as_tensor(value, dtype=torch.float32)
        if scale.shape not in ((), (heads_kv,)):
            return None, (f"{name} must be a float or one value per key/value head "
                          f"({heads_kv}), got shape {tuple(scale.shape)}")
        rows.append(scale.expand(heads_kv))
    return torch.stack(rows).contiguous(), None
