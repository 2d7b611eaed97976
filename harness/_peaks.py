"""Device peaks for the roofline: a catalog of Intel GPUs, overridden by measured ceilings.

Catalog figures come from ../shared/notes/xe2-facts.md (vendor specs, derived as cores x
per-clock rate x clock). A measured ceiling (``xe2tune roofline``) always wins: the catalog is
only a default until the device has been measured; measured ceilings live in the results
database.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeaks:
    """Peak FLOP/s per storage dtype (its compute precision) and DRAM bandwidth in B/s."""

    flops: dict[str, float]
    bandwidth: float
    source: str  # "catalog" or "measured"
    llc_bytes: int = 0

    def peak_flops(self, dtype: str) -> float:
        return self.flops[dtype]


@dataclass(frozen=True)
class _CatalogEntry:
    match: tuple[str, ...]  # all substrings must appear in the device name (case-insensitive)
    xmx_tflops: float  # fp16/bf16 dense on the matrix engines
    fp32_tflops: float
    bandwidth_gbs: float
    l2_mb: float


CATALOG: tuple[_CatalogEntry, ...] = (
    _CatalogEntry(("b580",), 116.7, 13.7, 456.0, 18),
    _CatalogEntry(("b570",), 101.4, 11.5, 380.0, 18),
    _CatalogEntry(("140v",), 33.6, 4.2, 136.5, 8),
    _CatalogEntry(("lunar lake",), 33.6, 4.2, 136.5, 8),
    _CatalogEntry(("a770",), 137.6, 17.2, 560.0, 16),
    _CatalogEntry(("max 1550",), 838.9, 52.4, 3280.0, 408),
)


def catalog_peaks(device_name: str) -> DevicePeaks | None:
    """Catalog peaks for a device name, or None when the device is not in the catalog."""
    name = device_name.lower()
    for entry in CATALOG:
        if all(m in name for m in entry.match):
            half = entry.xmx_tflops * 1e12
            return DevicePeaks(
                flops={"fp16": half, "bf16": half, "fp32": entry.fp32_tflops * 1e12},
                bandwidth=entry.bandwidth_gbs * 1e9,
                source="catalog",
                llc_bytes=int(entry.l2_mb * 2**20),
            )
    return None
