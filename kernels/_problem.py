"""The problem an SDPA kernel solves: shapes, dtype, mode and masking."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from xe2tune.errors import InvalidProblem

Mode = Literal["prefill", "decode"]
DType = Literal["fp16", "bf16", "fp32"]
KvDType = Literal["e4m3", "e5m2"]

DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")
MODES: tuple[str, ...] = ("prefill", "decode")
HEAD_DIMS: tuple[int, ...] = (64, 96, 128, 192, 256, 576)
# Dv, the V/O head dim: D itself for MHA/GQA; 128 for MLA prefill (D 192 = 128 nope + 64 rope),
# 512 for absorbed MLA decode (D 576 = 512 latent + 64 rope, K and V one shared latent head).
HEAD_DIMS_V: tuple[int, ...] = (64, 96, 128, 192, 256, 512)
# D 576 is absorbed MLA decode's (512 latent + 64 rope) and comes with Dv 512: its default Dv.
DEFAULT_HEAD_DIM_V = {576: 512}


def default_head_dim_v(head_dim: int) -> int:
    """The V/O head dim a problem with this Q/K head dim has when none is named."""
    return DEFAULT_HEAD_DIM_V.get(head_dim, head_dim)

# FP8 K/V caches (OCP float8): stored as one byte per element with a float scale per tensor or
# per KV head, converted to Q's dtype in registers (Xe2's DPAS takes no FP8 operands).
KV_DTYPES: tuple[str, ...] = ("e4m3", "e5m2")
MAX_DECODE_Q_LEN = 16
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "e4m3": 1, "e5m2": 1}


@dataclass(frozen=True)
class ProblemSpec:
    """One attention problem, layout Q/K [batch, len, heads, D], V/O [batch, len, heads, Dv].

    Causal masks are aligned bottom-right (query i sees keys 0 .. i + kv_len - q_len), as
    FlashAttention 2 does. ``head_dim_v`` (Dv) defaults to ``head_dim`` (D), to 512 for D 576
    (absorbed MLA: 512 latent + 64 rope dims); ``kv_dtype`` None
    means K and V are stored in ``dtype``, else in that FP8 format (Q and O stay ``dtype``).
    Both are left out of :meth:`to_dict` and :meth:`key` at their defaults, so problems named
    before they existed keep their identity.
    """

    mode: Mode
    head_dim: int
    dtype: DType
    q_len: int
    kv_len: int
    heads_q: int = 8
    heads_kv: int = 8
    batch: int = 1
    causal: bool = False
    head_dim_v: int = None  # type: ignore[assignment]  # None -> head_dim, set in __post_init__
    kv_dtype: KvDType | None = None

    def __post_init__(self) -> None:
        if self.head_dim_v is None:
            object.__setattr__(self, "head_dim_v", default_head_dim_v(self.head_dim))
        if self.mode not in MODES:
            raise InvalidProblem(
                f"mode {self.mode!r} is not supported; accepted: {', '.join(MODES)}"
            )
        if self.dtype not in DTYPES:
            raise InvalidProblem(
                f"dtype {self.dtype!r} is not supported; accepted: {', '.join(DTYPES)}"
            )
        if self.head_dim not in HEAD_DIMS:
            raise InvalidProblem(
                f"head dim {self.head_dim} is not supported; accepted: "
                + ", ".join(map(str, HEAD_DIMS))
            )
        if self.head_dim_v not in HEAD_DIMS_V:
            raise InvalidProblem(
                f"head dim v {self.head_dim_v} is not supported; accepted: "
                + ", ".join(map(str, HEAD_DIMS_V))
            )
        if self.kv_dtype is not None:
            if self.kv_dtype not in KV_DTYPES:
                raise InvalidProblem(
                    f"kv dtype {self.kv_dtype!r} is not supported; accepted: "
                    + ", ".join(KV_DTYPES) + " (or none: K/V in the problem's dtype)"
                )
            if self.dtype == "fp32":
                raise InvalidProblem(
                    f"kv dtype {self.kv_dtype} needs dtype fp16 or bf16 for Q and O, got fp32"
                )
        for name in ("q_len", "kv_len", "heads_q", "heads_kv", "batch"):
            if int(getattr(self, name)) < 1:
                raise InvalidProblem(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.heads_q % self.heads_kv:
            raise InvalidProblem(
                f"heads_q ({self.heads_q}) must be a multiple of heads_kv ({self.heads_kv})"
            )
        if self.mode == "decode" and self.q_len > MAX_DECODE_Q_LEN:
            raise InvalidProblem(
                f"decode takes q_len 1..{MAX_DECODE_Q_LEN}, got {self.q_len}; use mode prefill"
            )

    @property
    def kv_element_dtype(self) -> str:
        """The element type K and V are stored in: ``kv_dtype``, else ``dtype``."""
        return self.kv_dtype or self.dtype

    @property
    def is_mla(self) -> bool:
        """True when V's head dim differs from Q/K's (latent attention)."""
        return self.head_dim_v != self.head_dim

    @property
    def group_size(self) -> int:
        """Query heads per KV head (1 = MHA, heads_q = MQA)."""
        return self.heads_q // self.heads_kv

    @property
    def scale(self) -> float:
        """The default softmax scale, 1/sqrt(D)."""
        return self.head_dim**-0.5

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, field order fixed; Dv and kv_dtype only when not the default."""
        data = asdict(self)
        if data["head_dim_v"] == self.head_dim:
            del data["head_dim_v"]
        if data["kv_dtype"] is None:
            del data["kv_dtype"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemSpec:
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise InvalidProblem(f"unknown problem fields: {', '.join(sorted(unknown))}")
        return cls(**data)

    def key(self) -> str:
        """Stable string identity (used in study names and cache keys)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @staticmethod
    def choose_mode(q_len: int) -> Mode:
        """Prefill or decode from the query length, as ``xe2tune.sdpa`` does."""
        return "decode" if q_len <= MAX_DECODE_Q_LEN else "prefill"
