"""``GET /v1/configs`` and ``GET /v1/export``: the best config of every tuned problem."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool

from xe2tune.api.deps import DeviceFilter, IndexDep, StoreDep
from xe2tune.api.schemas import ConfigsPublic, ValidationErrorPublic
from xe2tune.db import export_cpp, export_json

router = APIRouter(prefix="/v1", tags=["configs"],
                   responses={422: {"model": ValidationErrorPublic}})

_MEDIA = {"json": "application/json", "cpp": "text/x-c++hdr; charset=utf-8"}
_FILE = {"json": "xe2tune_best_configs.json", "cpp": "xe2tune_best_configs.hpp"}


@router.get("/configs", response_model=ConfigsPublic)
async def get_configs(index: IndexDep, store: StoreDep, device: DeviceFilter) -> Response:
    """The best config per tuned problem: the document ``xe2tune export --format json`` writes.

    Each entry names its config's kernel family and carries the problem's seeded baselines.
    """
    if device is None:
        body = await run_in_threadpool(index.configs)
    else:
        body = export_json(await run_in_threadpool(store.best_per_problem, device)).encode()
    return Response(body, media_type="application/json")


@router.get(
    "/export",
    responses={200: {"content": {_MEDIA["cpp"]: {}, _MEDIA["json"]: {}},
                     "description": "the export file, as an attachment"}},
)
async def get_export(
    store: StoreDep,
    device: DeviceFilter,
    fmt: Annotated[Literal["json", "cpp"], Query(alias="format", description="json or cpp")]
    = "json",
) -> Response:
    """The export file of ``xe2tune export --format json|cpp``."""
    best = await run_in_threadpool(store.best_per_problem, device)
    text = export_json(best) if fmt == "json" else export_cpp(best)
    return Response(text, media_type=_MEDIA[fmt],
                    headers={"Content-Disposition": f'attachment; filename="{_FILE[fmt]}"'})
