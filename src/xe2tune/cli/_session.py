"""The device a command works on, with its limits and roofline peaks, opened once."""

from __future__ import annotations

from dataclasses import dataclass

import dpctl

from xe2tune.cli._app import err_console
from xe2tune.harness import (
    CeilingFile,
    DeviceListing,
    DevicePeaks,
    RooflineModel,
    device_caps,
    list_devices,
    measure_ceilings,
    open_queue,
)
from xe2tune.harness._peaks_lookup import device_key, peaks_for
from xe2tune.kernels import DeviceCaps


@dataclass(frozen=True)
class DeviceSession:
    """Queue, caps and peaks of the chosen device."""

    queue: dpctl.SyclQueue
    listing: DeviceListing
    peaks: DevicePeaks

    @property
    def caps(self) -> DeviceCaps:
        return self.listing.caps

    @property
    def roofline(self) -> RooflineModel:
        return RooflineModel(self.peaks)

    @property
    def llc_bytes(self) -> int:
        return max(self.peaks.llc_bytes, self.listing.global_mem_cache_bytes)


def open_session(device: str | None, *, quiet: bool = False) -> DeviceSession:
    """Open the device; measure its ceilings first when neither measured nor catalog peaks exist.

    Raises:
        DeviceError: when no device matches.
    """
    queue = open_queue(device)
    caps = device_caps(queue.sycl_device)
    listing = next(
        d for d in list_devices() if d.caps == caps
    )
    peaks = peaks_for(listing)
    if peaks is None:
        if not quiet:
            err_console.print(
                f"no peaks known for {caps.name}: measuring its FMA and copy ceilings once "
                "(about a minute; `xe2tune roofline` re-measures)"
            )
        peaks = measure_ceilings(queue).peaks(listing.global_mem_cache_bytes)
        CeilingFile().save(device_key(listing), peaks)
    return DeviceSession(queue=queue, listing=listing, peaks=peaks)
