"""The problems ``xe2tune search`` tunes when the user names only a head dim."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xe2tune.kernels import ProblemSpec, default_head_dim_v

GPU_PREFILL_SEQS = (512, 1024, 2048, 4096, 8192)
GPU_DECODE_KV = (1024, 4096, 16384, 32768)
# On the embedded CPU device one trial is a ~3.5 s build plus a measurement of up to a few
# seconds; these sizes keep the whole default command under 10 minutes on 2 cores while each
# problem is still large enough that tile choices matter.
CPU_PREFILL_SEQS = (512,)
CPU_DECODE_KV = (4096,)
# Latent attention decode: one latent K/V head shared by every query head (DeepSeek-V2-Lite has
# 16 query heads, V3 128); on the CPU device the small end only, to keep the run short.
GPU_MLA_DECODE_HEADS_Q = (16, 128)
CPU_MLA_DECODE_HEADS_Q = (16,)
GPU_MLA_DTYPES = ("fp16", "bf16")


@dataclass(frozen=True)
class ProblemOverrides:
    """What the user fixed on the command line; None keeps the device-adapted default.

    ``head_dim_v`` None means Dv = D, or the latent width for an absorbed MLA head dim.
    ``kv_dtype`` (FP8 K/V) applies to decode problems, and to prefill ones when the user asked
    for prefill by name (``modes``) or there is no decode problem: FP8 caches are a decode
    feature first, and an FP8 request is never dropped.
    """

    seqs: Sequence[int] | None = None
    modes: Sequence[str] | None = None
    causal: Sequence[bool] | None = None
    dtypes: Sequence[str] | None = None
    heads_q: int | None = None
    heads_kv: int | None = None
    batch: int | None = None
    head_dim_v: int | None = None
    kv_dtype: str | None = None


def _mla_decode(head_dim: int, head_dim_v: int, dtypes: Sequence[str], kv_dtype: str | None, *,
                on_gpu: bool, overrides: ProblemOverrides) -> list[ProblemSpec]:
    kvs = overrides.seqs or (GPU_DECODE_KV if on_gpu else CPU_DECODE_KV)
    heads = ((overrides.heads_q,) if overrides.heads_q
             else GPU_MLA_DECODE_HEADS_Q if on_gpu else CPU_MLA_DECODE_HEADS_Q)
    return [
        ProblemSpec(mode="decode", head_dim=head_dim, head_dim_v=head_dim_v, dtype=dtype,
                    kv_dtype=kv_dtype, q_len=1, kv_len=kv, heads_q=hq,
                    heads_kv=overrides.heads_kv or 1, batch=overrides.batch or 1)
        for dtype in dtypes for hq in heads for kv in kvs
    ]


def default_problems(
    head_dim: int, *, on_gpu: bool, overrides: ProblemOverrides
) -> list[ProblemSpec]:
    """Prefill (causal and not) and GQA decode problems adapted to the device class.

    Latent attention (Dv != D) gets its own shapes: an absorbed MLA head dim (576) means MLA
    decode problems (one latent K/V head, 16 and 128 query heads on a GPU); any other Dv != D
    (192 with ``--head-dim-v 128``) means MLA prefill problems; either mode still on request.

    Raises:
        InvalidProblem: for an unsupported head dim, Dv, kv dtype, dtype or shape.
    """
    head_dim_v = overrides.head_dim_v or default_head_dim_v(head_dim)
    mla = head_dim_v != head_dim
    # absorbed MLA decode (576 = 512 latent + 64 rope): the head dims with a Dv of their own
    absorbed = default_head_dim_v(head_dim) != head_dim
    modes = overrides.modes or (("decode",) if mla and absorbed else
                                ("prefill",) if mla else ("prefill", "decode"))
    dtypes = overrides.dtypes or (GPU_MLA_DTYPES if mla and on_gpu else ("fp16",))
    causals = overrides.causal or (False, True)
    problems: list[ProblemSpec] = []
    for mode in modes:
        fp8_here = mode == "decode" or overrides.modes or "decode" not in modes
        kv_dtype = overrides.kv_dtype if fp8_here else None
        if mode == "prefill":
            seqs = overrides.seqs or (GPU_PREFILL_SEQS if on_gpu else CPU_PREFILL_SEQS)
            hq = overrides.heads_q or (16 if on_gpu else 8)
            hkv = overrides.heads_kv or hq
            batch = overrides.batch or (4 if on_gpu else 1)
            for dtype in dtypes:
                for causal in causals:
                    for seq in seqs:
                        problems.append(ProblemSpec(
                            mode="prefill", head_dim=head_dim, head_dim_v=head_dim_v,
                            dtype=dtype, kv_dtype=kv_dtype, q_len=seq, kv_len=seq, heads_q=hq,
                            heads_kv=hkv, batch=batch, causal=causal,
                        ))
        elif mla:
            problems += _mla_decode(head_dim, head_dim_v, dtypes, kv_dtype, on_gpu=on_gpu,
                                    overrides=overrides)
        else:
            kvs = overrides.seqs or (GPU_DECODE_KV if on_gpu else CPU_DECODE_KV)
            hq = overrides.heads_q or 32
            hkv = overrides.heads_kv or 8
            batch = overrides.batch or 1
            for dtype in dtypes:
                for kv in kvs:
                    problems.append(ProblemSpec(
                        mode="decode", head_dim=head_dim, dtype=dtype, kv_dtype=kv_dtype,
                        q_len=1, kv_len=kv, heads_q=hq, heads_kv=hkv, batch=batch,
                        causal=False,
                    ))
    return problems
