"""``GET /v1/devices``: the devices results were measured on, with their peaks."""

from __future__ import annotations

from fastapi import APIRouter

from xe2tune.api.deps import StoreDep
from xe2tune.db import DeviceRecord

router = APIRouter(prefix="/v1/devices", tags=["devices"])


@router.get("", response_model=list[DeviceRecord])
def list_devices(store: StoreDep) -> list[DeviceRecord]:
    """Every device, oldest first, with the peaks roofline fractions are computed from: its
    measured FMA and copy ceilings when it has them (as the CLI uses), else the stored ones."""
    out = []
    for device in store.devices():
        measured = store.ceilings(device.id) if device.id is not None else None
        if measured is not None:
            device = device.model_copy(update={"peak_flops": dict(measured.flops),
                                               "peak_bandwidth": measured.bandwidth,
                                               "peak_source": "measured"})
        out.append(device)
    return out
