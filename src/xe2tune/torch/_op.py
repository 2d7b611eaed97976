"""The registered operator ``xe2tune::sdpa``: what torch.compile graphs call.

A custom op is opaque to the compiler: its fake implementation gives the output's shape and
strides from the inputs' alone, so graphs trace through it without running a kernel.
"""

import torch

from xe2tune.torch._launch import attend


# No ``from __future__ import annotations`` here: custom_op reads the schema from these hints.
@torch.library.custom_op("xe2tune::sdpa", mutates_args=())
def sdpa_op(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool,
            scale: float | None, config: str | None,
            kv_scale: torch.Tensor | None = None) -> torch.Tensor:
    """SDPA of [b, h, s, d] CPU tensors by xe2tune's kernels, causal aligned top-left.

    ``config`` is None (the tuned config), "default" or a LauncherConfig's JSON; ``kv_scale``
    [2, heads_kv] float32 dequantizes FP8 key/value (None otherwise).
    """
    return attend(query, key, value, causal=is_causal, scale=scale, config=config,
                  kv_scale=kv_scale)


@sdpa_op.register_fake
def _sdpa_fake(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool,
               scale: float | None, config: str | None,
               kv_scale: torch.Tensor | None = None) -> torch.Tensor:
    batch, heads, q_len, _ = query.shape
    # The strides of attend()'s output: [b, q_len, h, Dv] storage viewed as [b, h, q_len, Dv].
    return query.new_empty((batch, q_len, heads, value.shape[-1])).transpose(1, 2)
