"""``/v1/results``: every stored measurement, filtered and paged; remote tuners POST here."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from xe2tune.api.deps import CallerDep, StoreDep, device_filter
from xe2tune.api.schemas import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    ErrorPublic,
    ResultPage,
    ValidationErrorPublic,
)
from xe2tune.db import ResultFilters, ResultSubmission, SubmitOutcome
from xe2tune.measurement import TrialStatus

MAX_ID = 2**63 - 1
MAX_EXTENT = 2**31 - 1

router = APIRouter(prefix="/v1/results", tags=["results"],
                   responses={422: {"model": ValidationErrorPublic}})


class ResultParams(BaseModel):
    """Filters and page of ``GET /v1/results``; None means any."""

    model_config = ConfigDict(extra="forbid")

    device: str | None = Field(default=None, max_length=200,
                               description="device name (any case) or id")
    family: str | None = Field(default=None, max_length=200)
    mode: Literal["prefill", "decode"] | None = None
    head_dim: int | None = Field(default=None, ge=1, le=MAX_EXTENT)
    head_dim_v: int | None = Field(default=None, ge=1, le=MAX_EXTENT)
    dtype: Literal["fp16", "bf16", "fp32"] | None = None
    kv_dtype: Literal["e4m3", "e5m2"] | None = Field(default=None,
                                                    description="FP8 K/V problems only")
    causal: bool | None = None
    seq_min: int | None = Field(default=None, ge=1, le=MAX_EXTENT, description="kv_len >= this")
    seq_max: int | None = Field(default=None, ge=1, le=MAX_EXTENT, description="kv_len <= this")
    status: TrialStatus | None = None
    study_id: int | None = Field(default=None, ge=1, le=MAX_ID)
    limit: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    offset: int = Field(default=0, ge=0, le=MAX_ID)


@router.get("", response_model=ResultPage)
async def list_results(params: Annotated[ResultParams, Query()], store: StoreDep) -> ResultPage:
    """Stored trials with their measurements, newest first, ``limit`` at most per page."""
    await device_filter(store, params.device)
    if params.seq_min is not None and params.seq_max is not None \
            and params.seq_min > params.seq_max:
        raise HTTPException(422, f"query parameters seq_min ({params.seq_min}) and seq_max "
                                 f"({params.seq_max}): seq_min must be <= seq_max")
    filters = ResultFilters(**params.model_dump(exclude={"limit", "offset"}))
    items = await run_in_threadpool(store.results, filters, limit=params.limit,
                                    offset=params.offset)
    total = await run_in_threadpool(store.count_results, filters)
    following = params.offset + len(items)
    return ResultPage(items=items, total=total, limit=params.limit, offset=params.offset,
                      next_offset=following if following < total else None)


@router.post(
    "",
    response_model=SubmitOutcome,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": SubmitOutcome, "description": "already stored; nothing changed"},
               401: {"model": ErrorPublic}, 403: {"model": ErrorPublic}},
)
async def submit_result(
    submission: ResultSubmission, store: StoreDep, caller: CallerDep, response: Response
) -> SubmitOutcome:
    """Store one trial measured by a remote tuner; idempotent on (device, source, problem, config).

    Needs ``Authorization: Bearer <token>``: the server's ``XE2TUNE_API_TOKEN``, or a worker
    token of a campaign (``xe2tune campaign token create``), which stores results of that
    campaign's problems only.
    """
    if not caller.may_submit(submission.problem):
        raise HTTPException(403, f"worker token {caller.token_id} is for campaign "
                                 f"{caller.campaign_id}, whose problems do not include "
                                 f"{submission.problem.key()}")
    outcome = await run_in_threadpool(store.submit_result, submission)
    if not outcome.created:
        response.status_code = status.HTTP_200_OK
    return outcome
