"""The problem options ``search``, ``campaign create``, ``bench`` and ``inspect`` share: one
spelling, one bound, the accepted values named from the kernels' own lists; and the budget
defaults ``search`` and ``campaign create`` share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from xe2tune.errors import InvalidProblem
from xe2tune.kernels import HEAD_DIMS, HEAD_DIMS_V, KV_DTYPES

if TYPE_CHECKING:
    from xe2tune.tuner import ProblemOverrides

MAX_EXTENT = 2**31 - 1  # problem sizes reach the kernels as 32-bit ints
# Budgets that keep the default command under 10 minutes on the 2-core CPU device.
CPU_TRIALS, CPU_TIMEOUT_S, CPU_BENCH_BUDGET_S = 14, 480.0, 0.5
GPU_TRIALS, GPU_BENCH_BUDGET_S = 64, 1.0
CONFIRM_ROUNDS = 4


def _spelled(values: tuple) -> str:
    return ", ".join(map(str, values))


HeadDimOption = Annotated[int, typer.Option("--head-dim", help=_spelled(HEAD_DIMS))]
HeadDimVOption = Annotated[int | None, typer.Option(
    "--head-dim-v", help="V/O head dim Dv when it differs from D (latent attention): "
                         + _spelled(HEAD_DIMS_V))]
KvDtypeOption = Annotated[str | None, typer.Option(
    "--kv-dtype", help="store K/V in this FP8 format (Q and O keep --dtype): "
                       + _spelled(KV_DTYPES))]
SeqOption = Annotated[str | None, typer.Option(help="comma list of sequence lengths")]
ModeOption = Annotated[str | None, typer.Option(help="prefill or decode (default both)")]
CausalOption = Annotated[bool | None, typer.Option("--causal/--no-causal", help="default: both")]
DtypeOption = Annotated[str | None, typer.Option(help="comma list of fp16, bf16, fp32")]
HeadsQOption = Annotated[int | None, typer.Option("--heads-q", min=1, max=MAX_EXTENT)]
HeadsKvOption = Annotated[int | None, typer.Option("--heads-kv", min=1, max=MAX_EXTENT)]
BatchOption = Annotated[int | None, typer.Option(min=1, max=MAX_EXTENT)]


def _comma_list(text: str | None, cast: type) -> list | None:
    if text is None:
        return None
    try:
        values = [cast(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InvalidProblem(f"cannot read {text!r} as a comma-separated list") from None
    if cast is int and not all(1 <= v <= MAX_EXTENT for v in values):
        raise InvalidProblem(f"every value of {text!r} must be in 1..{MAX_EXTENT}")
    return values


def problem_overrides(
    *, seq: str | None, mode: str | None, causal: bool | None, dtype: str | None,
    heads_q: int | None, heads_kv: int | None, batch: int | None, head_dim_v: int | None,
    kv_dtype: str | None,
) -> ProblemOverrides:
    """The default problems' overrides from the shared options (``--seq`` and ``--dtype``
    comma lists).

    Raises:
        InvalidProblem: a list that does not read, or a length outside 1..2^31 - 1.
    """
    from xe2tune.tuner import ProblemOverrides

    return ProblemOverrides(
        seqs=_comma_list(seq, int), modes=[mode] if mode else None,
        causal=[causal] if causal is not None else None, dtypes=_comma_list(dtype, str),
        heads_q=heads_q, heads_kv=heads_kv, batch=batch, head_dim_v=head_dim_v,
        kv_dtype=kv_dtype)
