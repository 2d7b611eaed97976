"""The problem options ``search``, ``campaign create``, ``bench`` and ``inspect`` share: one
spelling, one bound, the accepted values named from the kernels' own lists."""

from __future__ import annotations

from typing import Annotated

import typer

from xe2tune.kernels import HEAD_DIMS, HEAD_DIMS_V, KV_DTYPES

MAX_EXTENT = 2**31 - 1  # problem sizes reach the kernels as 32-bit ints


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
