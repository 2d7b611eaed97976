"""Dependencies shared by the routers, as ``Annotated`` aliases."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from xe2tune.api._index import BestIndex
from xe2tune.api.settings import Settings, get_settings
from xe2tune.dashboards import DashboardViews
from xe2tune.db import ResultStore, names_device


def get_store(request: Request) -> ResultStore:
    """The store opened by the app's lifespan."""
    return request.app.state.store


def get_index(request: Request) -> BestIndex:
    """The ``/v1/best`` index kept fresh by the app's lifespan."""
    return request.app.state.best_index


def get_dashboard(request: Request) -> DashboardViews:
    """The dashboard views of this app."""
    return request.app.state.dashboard


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[ResultStore, Depends(get_store)]
IndexDep = Annotated[BestIndex, Depends(get_index)]
DashboardDep = Annotated[DashboardViews, Depends(get_dashboard)]

_bearer = HTTPBearer(auto_error=False, description="the server's XE2TUNE_API_TOKEN")


def require_token(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Let the request through only with the configured bearer token.

    Raises:
        HTTPException: 403 when no token is configured (writes are disabled) or the token is
            wrong; 401 when the request carries no bearer token.
    """
    if settings.api_token is None:
        raise HTTPException(403, "POST /v1/results is disabled: the server was started without "
                                 "XE2TUNE_API_TOKEN")
    if credentials is None:
        raise HTTPException(401, "missing bearer token: send 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})
    if not secrets.compare_digest(credentials.credentials.encode(), settings.api_token.encode()):
        raise HTTPException(403, "wrong bearer token")


async def device_filter(
    store: StoreDep,
    device: Annotated[str | None, Query(max_length=200,
                                        description="device name (any case) or id")] = None,
) -> str | None:
    """A ``device`` query parameter that names a stored device, checked before any listing.

    Raises:
        HTTPException: 422 naming the parameter and the known devices.
    """
    if device is None:
        return None
    known = await run_in_threadpool(store.devices)
    if not any(names_device(device, d.name, d.id) for d in known):
        names = ", ".join(sorted({d.name for d in known})) or "none (nothing stored yet)"
        raise HTTPException(422, f"query parameter device: no device {device!r} in the "
                                 f"database; accepted: {names} (or their ids)")
    return device


DeviceFilter = Annotated[str | None, Depends(device_filter)]
