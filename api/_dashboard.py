"""The dashboard at ``/``, its data for self-refresh, and plotly.js served from the package."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse

from xe2tune.api.deps import DashboardDep, SettingsDep
from xe2tune.dashboards import plotly_js, plotly_version

MAX_ID = 2**63 - 1

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
    """The data version the page compares with its own to know when to reload."""
    version = await run_in_threadpool(cache.version)
    return JSONResponse({"version": version}, headers={"Cache-Control": "no-store"})


@router.get("/dashboard/data")
async def dashboard_data(cache: DashboardDep) -> Response:
    """The page's payload at the current data version."""
    payload = await run_in_threadpool(cache.payload_json)
    return Response(payload, media_type="application/json", headers={"Cache-Control": "no-store"})


@router.get("/dashboard/importance/{study_id}")
async def dashboard_importance(
    study_id: Annotated[int, Path(ge=1, le=MAX_ID)], cache: DashboardDep
) -> Response:
    """One study's parameter importance, computed on first request (fANOVA takes a while)."""
    view = await run_in_threadpool(cache.importance, study_id)
    if view is None:
        raise HTTPException(404, f"no study {study_id}")
    return Response(view, media_type="application/json")


@router.get("/static/plotly-{version}.min.js")
async def plotly_asset(version: str) -> Response:
    """plotly.js from the installed plotly package: the dashboard works offline."""
    src, body = _plotly_asset()
    if src != f"/static/plotly-{version}.min.js":
        raise HTTPException(404, f"plotly.js {version} is not served; this server has {src}")
    return Response(body, media_type="text/javascript",
                    headers={"Cache-Control": "public, max-age=31536000, immutable"})
