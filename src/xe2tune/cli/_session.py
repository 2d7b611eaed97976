"""The device a command works on, with its limits and roofline peaks, opened once.

Peaks come from the results database (measured ceilings), else the catalog; a device with
neither gets its ceilings measured once and stored, so every roofline fraction has a roof.
"""

from __future__ import annotations

from dataclasses import dataclass

import dpctl

from xe2tune.cli._app import err_console
from xe2tune.db import DeviceRecord, MeasuredCeilings, ResultStore
from xe2tune.harness import (
    BenchSettings,
    Ceilings,
    DeviceListing,
    DevicePeaks,
    DeviceProcessSpec,
    RooflineModel,
    catalog_peaks,
    device_caps,
    list_devices,
    measure_ceilings,
    open_queue,
    overlaps_builds,
)
from xe2tune.kernels import DeviceCaps
from xe2tune.tuner import SupervisedTrialRunner


@dataclass(frozen=True)
class DeviceSession:
    """Queue, caps, store id and peaks of the chosen device."""

    queue: dpctl.SyclQueue
    listing: DeviceListing
    device_id: int
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


def device_record(listing: DeviceListing, peaks: DevicePeaks | None) -> DeviceRecord:
    """The store's row for a device, with the peaks its roofline fractions are computed from."""
    c = listing.caps
    return DeviceRecord(
        name=c.name, backend=c.backend, device_type=c.device_type,
        driver=listing.driver_version, compute_units=c.compute_units,
        global_mem_bytes=c.global_mem_bytes, local_mem_bytes=c.local_mem_bytes,
        max_work_group_size=c.max_work_group_size, sub_group_sizes=c.sub_group_sizes,
        peak_flops=dict(peaks.flops) if peaks else {},
        peak_bandwidth=peaks.bandwidth if peaks else None,
        peak_source=peaks.source if peaks else None,
    )


def stored_peaks(store: ResultStore, listing: DeviceListing) -> tuple[int, DevicePeaks | None]:
    """The device's id and its measured ceilings, else catalog peaks, else None."""
    device_id = store.upsert_device(device_record(listing, None))
    measured = store.ceilings(device_id)
    if measured is not None:
        return device_id, DevicePeaks(flops=dict(measured.flops), bandwidth=measured.bandwidth,
                                      source="measured", llc_bytes=measured.llc_bytes)
    return device_id, catalog_peaks(listing.caps.name)


def save_measured(store: ResultStore, listing: DeviceListing, device_id: int,
                  ceilings: Ceilings) -> DevicePeaks:
    """Store measured ceilings; from now on they are this device's peaks."""
    peaks = ceilings.peaks(listing.global_mem_cache_bytes)
    store.save_ceilings(device_id, MeasuredCeilings(
        flops=dict(peaks.flops), bandwidth=peaks.bandwidth, llc_bytes=peaks.llc_bytes,
        details={"fma_fp32": ceilings.fma_fp32, "fma_fp16": ceilings.fma_fp16,
                 "copy": ceilings.copy_bandwidth},
    ))
    store.upsert_device(device_record(listing, peaks))
    return peaks


def listing_for(queue: dpctl.SyclQueue) -> DeviceListing:
    """The listing of the queue's device."""
    caps = device_caps(queue.sycl_device)
    return next(d for d in list_devices() if d.caps == caps)


def open_session(device: str | None, store: ResultStore, *, quiet: bool = False) -> DeviceSession:
    """Open the device; measure its ceilings first when neither measured nor catalog peaks exist.

    Raises:
        DeviceError: when no device matches.
    """
    queue = open_queue(device)
    listing = listing_for(queue)
    device_id, peaks = stored_peaks(store, listing)
    if peaks is None:
        if not quiet:
            err_console.print(
                f"no peaks known for {listing.caps.name}: measuring its FMA and copy ceilings "
                "once (`xe2tune roofline` re-measures)"
            )
        peaks = save_measured(store, listing, device_id, measure_ceilings(
            queue, llc_bytes=listing.global_mem_cache_bytes))
    else:
        store.upsert_device(device_record(listing, peaks))
    return DeviceSession(queue=queue, listing=listing, device_id=device_id, peaks=peaks)


def open_runner(session: DeviceSession, settings: BenchSettings) -> SupervisedTrialRunner:
    """The trial runner of a command: a supervised worker process on the session's device,
    under the default time limits (``XE2TUNE_BUILD_TIMEOUT`` sets the build limit).

    Raises:
        InvalidConfig: if ``XE2TUNE_BUILD_TIMEOUT`` is not a positive number.
    """
    return SupervisedTrialRunner(DeviceProcessSpec(
        device=session.listing.filter_string, settings=settings, peaks=session.peaks,
        llc_bytes=session.llc_bytes, overlap_builds=overlaps_builds(session.caps),
    ))
