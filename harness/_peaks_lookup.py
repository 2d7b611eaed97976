"""The peaks the tool uses for a device: measured ceilings first, then the catalog."""

from __future__ import annotations

from xe2tune.harness._device import DeviceListing
from xe2tune.harness._peaks import CeilingFile, DevicePeaks, resolve_peaks


def device_key(listing: DeviceListing) -> str:
    """Identity of a device for stored ceilings: backend, type, name and driver."""
    caps = listing.caps
    return f"{caps.backend}:{caps.device_type}:{caps.name}:{listing.driver_version}"


def peaks_for(listing: DeviceListing, ceilings: CeilingFile | None = None) -> DevicePeaks | None:
    """Measured or catalog peaks of a listed device; None when neither exists yet."""
    return resolve_peaks(device_key(listing), listing.caps.name, ceilings or CeilingFile())
