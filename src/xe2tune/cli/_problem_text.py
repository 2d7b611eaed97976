"""How the CLI writes a problem's head dims and element types: the default ones as before, Dv
and the K/V dtype only where they differ (latent attention, FP8 K/V)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xe2tune.kernels import ProblemSpec


def dtype_words(problem: ProblemSpec) -> str:
    """``fp16``, or ``bf16 K/V=e4m3`` when K and V are stored in an FP8 format."""
    return problem.dtype + (f" K/V={problem.kv_dtype}" if problem.kv_dtype else "")


def head_words(problem: ProblemSpec | Mapping[str, Any]) -> str:
    """``D=128 fp16``, or ``D=576 Dv=512 bf16 K/V=e4m3`` (a stored dict form is accepted)."""
    p = problem if isinstance(problem, ProblemSpec) else ProblemSpec.from_dict(dict(problem))
    return f"D={p.head_dim}" + (f" Dv={p.head_dim_v}" if p.is_mla else "") + f" {dtype_words(p)}"
