"""``GET /healthz``: the service is up and its database answers."""

from __future__ import annotations

from fastapi import APIRouter

from xe2tune.api.deps import StoreDep
from xe2tune.api.schemas import ErrorPublic, Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health,
            responses={503: {"model": ErrorPublic, "description": "the database failed"}})
def healthz(store: StoreDep) -> Health:
    """Ok with the database URL (password masked) and its data version; 503 when it fails."""
    return Health(status="ok", database=store.url, data_version=store.data_version())
