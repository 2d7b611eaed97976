"""Device peaks for the roofline: a catalog of Intel GPUs, overridden by measured ceilings.

Catalog figures are the device descriptions' (``kernels/devices.json``, from the vendor specs
in docs/xe2-facts.md, derived as cores x per-clock rate x clock). A measured ceiling
(``xe2tune roofline``) always wins: the catalog is only a default until the device has been
measured; measured ceilings live in the results database.
"""

from __future__ import annotations

from dataclasses import dataclass

from xe2tune.kernels import describe_live_device


@dataclass(frozen=True)
class DevicePeaks:
    """Peak FLOP/s per storage dtype (its compute precision) and DRAM bandwidth in B/s."""

    flops: dict[str, float]
    bandwidth: float
    source: str  # "catalog" or "measured"
    llc_bytes: int = 0

    def peak_flops(self, dtype: str) -> float:
        return self.flops[dtype]


def catalog_peaks(device_name: str) -> DevicePeaks | None:
    """Catalog peaks for a device name, or None when the device is not in the catalog."""
    description = describe_live_device(device_name)
    if description is None:
        return None
    peaks = description.peaks
    half = peaks.xmx_tflops * 1e12
    return DevicePeaks(
        flops={"fp16": half, "bf16": half, "fp32": peaks.fp32_tflops * 1e12},
        bandwidth=peaks.bandwidth_gbs * 1e9,
        source="catalog",
        llc_bytes=int(peaks.l2_mb * 2**20),
    )
