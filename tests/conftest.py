"""Shared fixtures: one in-order profiling queue on the embedded opencl:cpu device per session.

Tests that need a SYCL device carry the ``requires_xpu`` marker; it is decided once here, and
those tests are skipped (not failed) on a machine without any SYCL runtime.
"""

from __future__ import annotations

import functools
import os
import tempfile
from typing import TYPE_CHECKING

import pytest

from xe2tune.errors import DeviceError
from xe2tune.harness import device_caps, open_queue
from xe2tune.kernels import DeviceCaps

if TYPE_CHECKING:  # dpctl must load after xe2tune has set the runtime environment
    import dpctl

CPU_FILTER = "opencl:cpu"

# The limits the opencl:cpu runtime reports (notes/cpu-runtime.md), stated directly so that
# validation tests need no device.
CPU_CAPS = DeviceCaps(
    name="Intel OpenCL CPU (stated)", backend="opencl", device_type="cpu",
    max_work_group_size=8192, sub_group_sizes=(4, 8, 16, 32, 64), local_mem_bytes=256 * 1024,
    compute_units=2, global_mem_bytes=8 << 30,
)


def pytest_configure(config: pytest.Config) -> None:
    # Tests and the CLIs they start never write into the user's data dir (default database,
    # measured ceilings); the native-extension and kernel caches stay shared on purpose.
    if "XE2TUNE_DATA_DIR" not in os.environ:
        os.environ["XE2TUNE_DATA_DIR"] = tempfile.mkdtemp(prefix="xe2tune-test-data-")


@functools.cache
def _cpu_queue() -> dpctl.SyclQueue | None:
    try:
        return open_queue(CPU_FILTER)
    except DeviceError:
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("requires_xpu" in item.keywords for item in items) and _cpu_queue() is None:
        skip = pytest.mark.skip(reason=f"no SYCL device {CPU_FILTER} (install intel-opencl-rt)")
        for item in items:
            if "requires_xpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_queue() -> dpctl.SyclQueue:
    """The in-order, profiling queue on opencl:cpu (tests using it carry requires_xpu)."""
    queue = _cpu_queue()
    if queue is None:
        pytest.skip(f"no SYCL device {CPU_FILTER}")
    return queue


@pytest.fixture(scope="session")
def cpu_caps(cpu_queue: dpctl.SyclQueue) -> DeviceCaps:
    """The limits of the real opencl:cpu device."""
    return device_caps(cpu_queue.sycl_device)
