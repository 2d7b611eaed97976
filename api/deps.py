"""Dependencies shared by the routers, as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from xe2tune.api._credentials import Caller, CredentialRefused, Credentials, Refusal
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

_bearer = HTTPBearer(auto_error=False, description="the server's XE2TUNE_API_TOKEN, or a "
                                                   "worker token of a campaign")


async def require_token(
    settings: SettingsDep,
    store: StoreDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The caller, when it presents the API token or a live worker token.

    Raises:
        HTTPException: 401 when the request carries no bearer token; 403 when the token is
            wrong or revoked, or when the server has no API token and the token is not a
            worker token (writes are then disabled but for workers).
    """
    if credentials is None:
        raise HTTPException(401, "missing bearer token: send 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})
    known = Credentials(store, settings.api_token)
    try:
        return await run_in_threadpool(known.identify, credentials.credentials)
    except CredentialRefused as exc:
        if exc.refusal is Refusal.UNKNOWN and settings.api_token is None:
            raise HTTPException(403, "POST /v1/results is disabled but for worker tokens (`xe2tune "
                                     "campaign token create`): the server was started without "
                                     "XE2TUNE_API_TOKEN") from None
        raise HTTPException(403, str(exc)) from None


CallerDep = Annotated[Caller, Depends(require_token)]


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
