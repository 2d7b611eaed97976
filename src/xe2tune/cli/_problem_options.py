"""The problem options ``search`` and ``campaign create`` share: one spelling, one bound."""

from __future__ import annotations

from typing import Annotated

import typer

from xe2tune.cli._bench import MAX_EXTENT

HeadDimOption = Annotated[int, typer.Option("--head-dim", help="64, 96, 128, 192 or 256")]
SeqOption = Annotated[str | None, typer.Option(help="comma list of sequence lengths")]
ModeOption = Annotated[str | None, typer.Option(help="prefill or decode (default both)")]
CausalOption = Annotated[bool | None, typer.Option("--causal/--no-causal", help="default: both")]
DtypeOption = Annotated[str | None, typer.Option(help="comma list of fp16, bf16, fp32")]
HeadsQOption = Annotated[int | None, typer.Option("--heads-q", min=1, max=MAX_EXTENT)]
HeadsKvOption = Annotated[int | None, typer.Option("--heads-kv", min=1, max=MAX_EXTENT)]
BatchOption = Annotated[int | None, typer.Option(min=1, max=MAX_EXTENT)]
