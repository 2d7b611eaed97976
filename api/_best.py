"""``GET /v1/best``: the launcher config a kernel launcher should use for its problem."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from xe2tune.api.deps import IndexDep
from xe2tune.api.schemas import BestPublic, ErrorPublic, ValidationErrorPublic
from xe2tune.db import BestQuery, kv_dtype_conflict
from xe2tune.kernels import HEAD_DIMS, HEAD_DIMS_V

MAX_EXTENT = 2**31 - 1

# An IntEnum rather than Literal: query strings arrive as text, and pydantic's lax mode turns
# "128" into an int enum member but not into an int Literal.
HeadDim = enum.IntEnum("HeadDim", {f"d{d}": d for d in HEAD_DIMS})  # type: ignore[misc]
HeadDimV = enum.IntEnum("HeadDimV", {f"d{d}": d for d in HEAD_DIMS_V})  # type: ignore[misc]

router = APIRouter(prefix="/v1", tags=["best"])


class BestParams(BaseModel):
    """The query of ``/v1/best``; seq is the key length, and the query length for prefill."""

    model_config = ConfigDict(extra="forbid")

    head_dim: HeadDim  # type: ignore[valid-type]
    dtype: Literal["fp16", "bf16", "fp32"]
    head_dim_v: HeadDimV | None = Field(  # type: ignore[valid-type]
        default=None, description="V/O head dim Dv when it differs from head_dim (MLA)")
    kv_dtype: Literal["e4m3", "e5m2"] | None = Field(
        default=None, description="FP8 format of K/V; absent: K/V in dtype")
    seq: int = Field(ge=1, le=MAX_EXTENT, description="key length (kv_len)")
    mode: Literal["prefill", "decode"] = "prefill"
    causal: bool = False
    q_len: int | None = Field(default=None, ge=1, le=MAX_EXTENT,
                              description="query length when it differs from seq")
    heads_q: int | None = Field(default=None, ge=1, le=MAX_EXTENT)
    heads_kv: int | None = Field(default=None, ge=1, le=MAX_EXTENT)
    batch: int | None = Field(default=None, ge=1, le=MAX_EXTENT)
    device: str | None = Field(default=None, max_length=200,
                               description="device name (any case) or id")

    @model_validator(mode="after")
    def _fp8_needs_a_16_bit_dtype(self) -> BestParams:
        if (conflict := kv_dtype_conflict(self.dtype, self.kv_dtype)) is not None:
            raise ValueError(conflict)
        return self

    def to_query(self) -> BestQuery:
        """The store's query for these parameters."""
        head_dim_v = int(self.head_dim_v) if self.head_dim_v is not None else None
        return BestQuery(**{**self.model_dump(), "head_dim": int(self.head_dim),
                            "head_dim_v": head_dim_v})


@router.get(
    "/best",
    response_model=BestPublic,
    responses={404: {"model": ErrorPublic, "description": "nothing tuned for this key; a hint"},
               422: {"model": ValidationErrorPublic}},
)
async def get_best(
    params: Annotated[BestParams, Query()], index: IndexDep, request: Request
) -> Response:
    """The best config for the key: exact when that problem was tuned, else the nearest one.

    Nearest means the tuned problem on the same device with the same mode, head_dim, head_dim_v,
    dtype, kv_dtype and causal flag whose seq is closest on a log scale (the rule of ``xe2tune
    best``): an MHA or fp16/bf16 K/V config never answers an MLA or FP8 K/V query, nor the
    reverse. The answer names the best config's kernel family and lists the seeded baselines
    stored for that problem ("seed 000 SageV1", "SYCL*TLA example", "oneDNN default") with the
    best's speedup over each, so a tuned result is always read against them.
    """
    query = params.to_query()
    answer = index.cached(query) or await run_in_threadpool(index.answer, query)
    index.alias(request.scope["query_string"], query)
    return Response(answer.body, status_code=answer.status, media_type="application/json")
