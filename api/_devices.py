"""``GET /v1/devices``: the devices results were measured on, with their peaks."""

from __future__ import annotations

from fastapi import APIRouter

from xe2tune.api.deps import StoreDep
from xe2tune.db import DeviceRecord

router = APIRouter(prefix="/v1/devices", tags=["devices"])


@router.get("", response_model=list[DeviceRecord])
def list_devices(store: StoreDep) -> list[DeviceRecord]:
    """Every device, oldest first; the peaks are what roofline fractions were computed from."""
    return store.devices()
