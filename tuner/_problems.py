"""The problems ``xe2tune search`` tunes when the user names only a head dim."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xe2tune.kernels import ProblemSpec

GPU_PREFILL_SEQS = (512, 1024, 2048, 4096, 8192)
GPU_DECODE_KV = (1024, 4096, 16384, 32768)
# On the embedded CPU device one trial is a ~3.5 s build plus a measurement of up to a few
# seconds; these sizes keep the whole default command under 10 minutes on 2 cores while each
# problem is still large enough that tile choices matter.
CPU_PREFILL_SEQS = (512,)
CPU_DECODE_KV = (4096,)


@dataclass(frozen=True)
class ProblemOverrides:
    """What the user fixed on the command line; None keeps the device-adapted default."""

    seqs: Sequence[int] | None = None
    modes: Sequence[str] | None = None
    causal: Sequence[bool] | None = None
    dtypes: Sequence[str] | None = None
    heads_q: int | None = None
    heads_kv: int | None = None
    batch: int | None = None


def default_problems(
    head_dim: int, *, on_gpu: bool, overrides: ProblemOverrides
) -> list[ProblemSpec]:
    """Prefill (causal and not) and GQA decode problems adapted to the device class.

    Raises:
        InvalidProblem: for an unsupported head dim, dtype or shape in the overrides.
    """
    modes = overrides.modes or ("prefill", "decode")
    dtypes = overrides.dtypes or ("fp16",)
    causals = overrides.causal or (False, True)
    problems: list[ProblemSpec] = []
    for mode in modes:
        if mode == "prefill":
            seqs = overrides.seqs or (GPU_PREFILL_SEQS if on_gpu else CPU_PREFILL_SEQS)
            hq = overrides.heads_q or (16 if on_gpu else 8)
            hkv = overrides.heads_kv or hq
            batch = overrides.batch or (4 if on_gpu else 1)
            for dtype in dtypes:
                for causal in causals:
                    for seq in seqs:
                        problems.append(ProblemSpec(
                            mode="prefill", head_dim=head_dim, dtype=dtype, q_len=seq,
                            kv_len=seq, heads_q=hq, heads_kv=hkv, batch=batch, causal=causal,
                        ))
        else:
            kvs = overrides.seqs or (GPU_DECODE_KV if on_gpu else CPU_DECODE_KV)
            hq = overrides.heads_q or 32
            hkv = overrides.heads_kv or 8
            batch = overrides.batch or 1
            for dtype in dtypes:
                for kv in kvs:
                    problems.append(ProblemSpec(
                        mode="decode", head_dim=head_dim, dtype=dtype, q_len=1, kv_len=kv,
                        heads_q=hq, heads_kv=hkv, batch=batch, causal=False,
                    ))
    return problems
