"""The dashboard at ``/``, its views fetched on demand, and plotly.js served from the package.

The page embeds a summary; each view is its own request, answered from the dashboard cache
(one computation per data version): a device's downsampled roofline, a page of the best-configs
table with its filters and sort order, a study's convergence and its parameter importance.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse

from xe2tune.api.deps import DashboardDep, SettingsDep
from xe2tune.dashboards import (
    MAX_PAGE_ROWS,
    ROOFLINE_POINTS,
    BestPageQuery,
    SortKey,
    plotly_js,
    plotly_version,
)
from xe2tune.kernels import HEAD_DIMS, HEAD_DIMS_V

MAX_ID = 2**63 - 1
MAX_ROOFLINE_POINTS = 20_000

router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def _plotly_asset() -> tuple[str, bytes]:
    return f"/static/plotly-{plotly_version()}.min.js", plotly_js().encode()


@router.get("/", response_class=HTMLResponse)
async def dashboard(cache: DashboardDep, settings: SettingsDep) -> HTMLResponse:
    """The live dashboard page."""
    src, _ = _plotly_asset()
    page = await run_in_threadpool(cache.page, plotly_src=src, poll_s=settings.dashboard_poll_s)
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


@router.get("/dashboard/version")
async def dashboard_version(cache: DashboardDep) -> JSONResponse:
    """The data version the page compares with its own to know when to reload, and whether
    its views are computed yet (until then the last complete ones are served)."""
    version, ready = await run_in_threadpool(lambda: (cache.version(), cache.views_ready()))
    return JSONResponse({"version": version, "views_ready": ready},
                        headers={"Cache-Control": "no-store"})


def _json(body: str) -> Response:
    return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})


def _found(view: str | None, what: str) -> str:
    """The view, or a 404 naming what does not exist."""
    if view is None:
        raise HTTPException(404, f"no {what}")
    return view


@router.get("/dashboard/summary")
async def dashboard_summary(cache: DashboardDep) -> Response:
    """The page's first payload: counts, devices, filters and studies at the current version."""
    return _json(await run_in_threadpool(cache.summary_json))


@router.get("/dashboard/roofline/{device_id}")
async def dashboard_roofline(
    device_id: Annotated[int, Path(ge=1, le=MAX_ID)], cache: DashboardDep,
    max_points: Annotated[int, Query(ge=10, le=MAX_ROOFLINE_POINTS)] = ROOFLINE_POINTS,
) -> Response:
    """One device's roofline: every best, baseline and Pareto point, a sample of the rest."""
    view = await run_in_threadpool(cache.roofline, device_id, max_points)
    return _json(_found(view, f"device {device_id}"))


@router.get("/dashboard/best")
async def dashboard_best(  # noqa: PLR0913 - one parameter per filter
    cache: DashboardDep,
    device: Annotated[str | None, Query(max_length=256)] = None,
    dtype: Literal["fp16", "bf16", "fp32"] | None = None,
    head_dim: Annotated[int | None, Query(ge=1, le=1024)] = None,
    head_dim_v: Annotated[int | None, Query(ge=1, le=1024)] = None,
    kv_dtype: Literal["fp16", "bf16", "fp32", "e4m3", "e5m2"] | None = None,
    mode: Literal["prefill", "decode"] | None = None,
    sort: SortKey | None = None,
    order: Literal["asc", "desc"] = "asc",
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_ROWS)] = 50,
) -> Response:
    """A page of the best-configs table, filtered and sorted on the server."""
    for name, value, accepted in (("head_dim", head_dim, HEAD_DIMS),
                                  ("head_dim_v", head_dim_v, HEAD_DIMS_V)):
        if value is not None and value not in accepted:
            raise HTTPException(422, f"query parameter {name}: {value} is not supported; "
                                     "accepted: " + ", ".join(map(str, accepted)))
    query = BestPageQuery(device=device, dtype=dtype, head_dim=head_dim, head_dim_v=head_dim_v,
                          kv_dtype=kv_dtype, mode=mode, sort=sort,
                          descending=order == "desc", offset=offset, limit=limit)
    return _json(await run_in_threadpool(cache.best_page, query))


@router.get("/dashboard/study/{study_id}")
async def dashboard_study(
    study_id: Annotated[int, Path(ge=1, le=MAX_ID)], cache: DashboardDep
) -> Response:
    """One study's convergence, read when the study is opened."""
    view = await run_in_threadpool(cache.study, study_id)
    return _json(_found(view, f"study {study_id}"))


@router.get("/dashboard/importance/{study_id}")
async def dashboard_importance(
    study_id: Annotated[int, Path(ge=1, le=MAX_ID)], cache: DashboardDep
) -> Response:
    """One study's parameter importance, computed on first request (fANOVA takes a while)."""
    view = await run_in_threadpool(cache.importance, study_id)
    return Response(_found(view, f"study {study_id}"), media_type="application/json")


@router.get("/static/plotly-{version}.min.js")
async def plotly_asset(version: str) -> Response:
    """plotly.js from the installed plotly package: the dashboard works offline."""
    src, body = _plotly_asset()
    if src != f"/static/plotly-{version}.min.js":
        raise HTTPException(404, f"plotly.js {version} is not served; this server has {src}")
    return Response(body, media_type="text/javascript",
                    headers={"Cache-Control": "public, max-age=31536000, immutable"})
