"""The problem an SDPA kernel solves: shapes, dtype, mode and masking."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from xe2tune.errors import InvalidProblem

Mode = Literal["prefill", "decode"]
DType = Literal["fp16", "bf16", "fp32"]

DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")
MODES: tuple[str, ...] = ("prefill", "decode")
HEAD_DIMS: tuple[int, ...] = (64, 96, 128, 192, 256)
MAX_DECODE_Q_LEN = 16
ELEMENT_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}


@dataclass(frozen=True)
class ProblemSpec:
    """One attention problem, layout Q [batch, q_len, heads_q, D], K/V [batch, kv_len, heads_kv, D].

    Causal masks are aligned bottom-right (query i sees keys 0 .. i + kv_len - q_len), as
    FlashAttention 2 does.
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

    def __post_init__(self) -> None:
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
    def head_dim_v(self) -> int:
        """Dv, the V/O head dim (equal to D for every kernel here)."""
        return self.head_dim

    @property
    def group_size(self) -> int:
        """Query heads per KV head (1 = MHA, heads_q = MQA)."""
        return self.heads_q // self.heads_kv

    @property
    def scale(self) -> float:
        """The default softmax scale, 1/sqrt(D)."""
        return self.head_dim**-0.5

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, field order fixed."""
        return asdict(self)

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
