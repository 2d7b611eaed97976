"""Device discovery and selection through dpctl: in-order profiling queues on a SYCL device."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import dpctl

from xe2tune.config import cpu_vectorizer_mode, device_filter
from xe2tune.errors import DeviceError
from xe2tune.kernels import DeviceCaps, describe_live_device, has_matrix_aspect

DEFAULT_FALLBACK_FILTER = "opencl:cpu"
_NO_RUNTIME_HINT = (
    "no SYCL device found; install a runtime: `pip install intel-opencl-rt` for the CPU, or "
    "Intel's GPU driver (Level Zero / OpenCL) for an Arc or Xe GPU"
)


@dataclass(frozen=True)
class DeviceListing:
    """One device as ``xe2tune devices`` shows it."""

    filter_string: str
    caps: DeviceCaps
    driver_version: str
    global_mem_cache_bytes: int


def _filter_string(device: dpctl.SyclDevice) -> str:
    backend = device.backend.name
    kind = device.device_type.name
    index = [d for d in dpctl.get_devices(backend=backend, device_type=kind)].index(device)
    return f"{backend}:{kind}:{index}"


def device_caps(device: dpctl.SyclDevice) -> DeviceCaps:
    """The limits kernel families validate configs against.

    A live Intel GPU that the catalog describes takes the catalog's register file and matrix
    shape (the runtime reports neither), so a live device and ``--target`` validate alike.
    """
    width = max(4, int(device.native_vector_width_float))
    is_cpu = device.device_type.name == "cpu"
    intel_gpu = device.device_type.name == "gpu" and "Intel" in device.vendor
    matrix = _has_matrix_aspect(device)
    described = describe_live_device(device.name) if intel_gpu else None
    gpu_fields: dict = {}
    if intel_gpu:
        template = described.caps if described else XE2_GPU_DEFAULTS
        gpu_fields = {
            "registers_per_thread": template.registers_per_thread,
            "max_work_items_large_grf": template.max_work_items_large_grf,
            "matrix_shape": template.matrix_shape if matrix else (0, 0, 0),
        }
    aspects = tuple(a for a, present in (
        ("fp16", device.has_aspect_fp16), ("fp64", device.has_aspect_fp64),
        ("ext_intel_matrix", matrix)) if present)
    return DeviceCaps(
        name=device.name,
        backend=device.backend.name,
        device_type=device.device_type.name,
        max_work_group_size=int(device.max_work_group_size),
        sub_group_sizes=tuple(int(s) for s in device.sub_group_sizes),
        local_mem_bytes=int(device.local_mem_size),
        compute_units=int(device.max_compute_units),
        global_mem_bytes=int(device.global_mem_size),
        has_fp16=bool(device.has_aspect_fp16),
        has_bf16=True,
        has_matrix_engine=matrix,
        simd_width=width,
        # x86 doubled the register count with the 16-lane width (AVX-512: zmm0-31).
        simd_registers=32 if width >= 16 else 16,
        is_intel_gpu=intel_gpu,
        required_subgroup_size_ok=not (is_cpu and cpu_vectorizer_mode() == "1"),
        aspects=aspects,
        **gpu_fields,
    )


# An Intel GPU the catalog does not know is assumed to have Xe2's register file and DPAS shape.
XE2_GPU_DEFAULTS = DeviceCaps(
    name="Xe2 defaults", backend="level_zero", device_type="gpu", max_work_group_size=1024,
    sub_group_sizes=(16, 32), local_mem_bytes=128 << 10, compute_units=0, global_mem_bytes=0,
    registers_per_thread=(128, 256), max_work_items_large_grf=512, matrix_shape=(8, 16, 16),
)


def _has_matrix_aspect(device: dpctl.SyclDevice) -> bool:
    # dpctl 0.22 has no name for ext_intel_matrix: ask the runtime through our extension.
    return has_matrix_aspect(_queue_for(_filter_string(device)))


def _sycl_devices() -> list[dpctl.SyclDevice]:
    try:
        return dpctl.get_devices()
    except (dpctl.SyclDeviceCreationError, ValueError):  # no SYCL runtime installed
        return []


def list_devices() -> list[DeviceListing]:
    """Every SYCL device the runtime sees (empty when no runtime is installed)."""
    return [
        DeviceListing(
            filter_string=_filter_string(d),
            caps=device_caps(d),
            driver_version=d.driver_version,
            global_mem_cache_bytes=last_level_cache_bytes(d),
        )
        for d in _sycl_devices()
    ]


def last_level_cache_bytes(device: dpctl.SyclDevice) -> int:
    """The cache a benchmark's rotated buffers must exceed.

    The CPU runtime reports its L2 as the global memory cache, but a CPU device is the host,
    whose L3 may be hundreds of MiB (300 MiB on the Xeon VMs here): the host's largest cache.
    """
    reported = int(device.global_mem_cache_size)
    if device.device_type.name != "cpu":
        return reported
    return max(reported, _host_cache_bytes())


_SIZE_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


@cache
def _host_cache_bytes() -> int:
    sizes = [0]
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip()
        try:
            sizes.append(int(text[:-1]) * _SIZE_UNITS[text[-1]] if text[-1] in _SIZE_UNITS
                         else int(text))
        except (ValueError, IndexError):
            continue
    return max(sizes)


def resolve_device(filter_string: str | None = None) -> dpctl.SyclDevice:
    """The device for a SYCL filter string, ``XE2TUNE_DEVICE``, or the default.

    The default is the first GPU if any, else ``opencl:cpu``.

    Raises:
        DeviceError: no device at all (with how to install a runtime), or a filter matching none
            (listing the devices that exist).
    """
    # The devices' capabilities (device_caps asks the native extension for the matrix aspect,
    # compiling it on a new machine) only where a filter matches none and the error lists them:
    # a command checking its arguments needs the device, not its limits.
    devices = _sycl_devices()
    if not devices:
        raise DeviceError(_NO_RUNTIME_HINT)
    chosen = filter_string or device_filter()
    if chosen is None:
        gpus = [d for d in devices if d.device_type.name == "gpu"]
        return gpus[0] if gpus else _by_filter(DEFAULT_FALLBACK_FILTER)
    return _by_filter(chosen)


def _by_filter(filter_string: str) -> dpctl.SyclDevice:
    try:
        return dpctl.SyclDevice(filter_string)
    except (dpctl.SyclDeviceCreationError, ValueError, TypeError):
        known = ", ".join(f"{d.filter_string} ({d.caps.name})" for d in list_devices())
        raise DeviceError(
            f"no SYCL device matches {filter_string!r}; devices here: {known}"
        ) from None


@cache
def _queue_for(device_key: str) -> dpctl.SyclQueue:
    return dpctl.SyclQueue(
        dpctl.SyclDevice(device_key), property=["in_order", "enable_profiling"]
    )


def open_queue(filter_string: str | None = None) -> dpctl.SyclQueue:
    """An in-order queue with event profiling on the chosen device (one per device, reused).

    Raises:
        DeviceError: as :func:`resolve_device`.
    """
    return _queue_for(_filter_string(resolve_device(filter_string)))
