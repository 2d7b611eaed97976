"""Device descriptions as data (``devices.json``): GPUs that are not here, for dry runs and peaks.

A description holds what validation needs (a :class:`DeviceCaps`) and the catalog peaks of the
roofline. The same description validates a config whether the device is live (a live Intel GPU
whose name matches takes the catalog's register file and matrix shape) or named with
``--target``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from xe2tune.errors import InvalidConfig
from xe2tune.kernels._device_caps import DeviceCaps

_CATALOG_FILE = Path(__file__).parent / "devices.json"


@dataclass(frozen=True)
class CatalogPeaks:
    """Vendor peaks: fp16/bf16 on the matrix engines, fp32 on the vector engines, DRAM, L2."""

    xmx_tflops: float
    fp32_tflops: float
    bandwidth_gbs: float
    l2_mb: float


@dataclass(frozen=True)
class DeviceDescription:
    """One catalog device: its key and aliases, how live device names match it, its name for
    Intel's offline compiler, caps, peaks."""

    key: str
    aliases: tuple[str, ...]
    match: tuple[str, ...]  # every substring must appear in a live device's name (lower case)
    architecture: str
    ocloc_device: str  # the GPU's name for Intel's offline compiler (``ocloc -device``)
    caps: DeviceCaps
    peaks: CatalogPeaks

    def matches(self, device_name: str) -> bool:
        """Whether a live device of this name is this catalog device."""
        name = device_name.lower()
        return all(m in name for m in self.match)


def _description(entry: dict[str, Any]) -> DeviceDescription:
    caps = DeviceCaps(
        name=entry["name"], backend="level_zero", device_type="gpu",
        max_work_group_size=entry["max_work_group_size"],
        sub_group_sizes=tuple(entry["sub_group_sizes"]),
        local_mem_bytes=entry["local_mem_kib"] * 1024,
        compute_units=entry["compute_units"],
        global_mem_bytes=entry["global_mem_gib"] << 30,
        has_fp16="fp16" in entry["aspects"],
        has_matrix_engine="ext_intel_matrix" in entry["aspects"],
        is_intel_gpu=True,
        registers_per_thread=tuple(entry["registers_per_thread"]),
        max_work_items_large_grf=entry["max_work_items_large_grf"],
        matrix_shape=tuple(entry["matrix_shape"]),
        aspects=tuple(entry["aspects"]),
    )
    return DeviceDescription(
        key=entry["key"], aliases=tuple(entry["aliases"]), match=tuple(entry["match"]),
        architecture=entry["architecture"], ocloc_device=entry["ocloc_device"], caps=caps,
        peaks=CatalogPeaks(**entry["peaks"]),
    )


@cache
def device_catalog() -> tuple[DeviceDescription, ...]:
    """Every catalog device, in the file's order."""
    return tuple(_description(e) for e in json.loads(_CATALOG_FILE.read_text())["devices"])


def catalog_device(key: str) -> DeviceDescription:
    """The catalog device called ``key`` (or one of its aliases), case-insensitive.

    Raises:
        InvalidConfig: if no catalog device has that name (the message lists the keys).
    """
    wanted = key.strip().lower()
    for description in device_catalog():
        if wanted == description.key or wanted in description.aliases:
            return description
    keys = ", ".join(d.key for d in device_catalog())
    raise InvalidConfig(f"no catalog device {key!r}; accepted: {keys}")


def describe_live_device(device_name: str) -> DeviceDescription | None:
    """The catalog description a live device's name matches, if any."""
    for description in device_catalog():
        if description.matches(device_name):
            return description
    return None
