"""Run and measure kernels: device selection, the timing protocol, correctness and roofline."""

from __future__ import annotations

from xe2tune.harness._bench import BenchSettings, BufferRotation, bench, device_seconds
from xe2tune.harness._build_gate import BuildGate, overlaps_builds
from xe2tune.harness._ceilings import (
    CEILING_SETTINGS,
    Ceilings,
    measure_ceilings,
    measure_copy_bandwidth,
)
from xe2tune.harness._device import (
    DeviceListing,
    device_caps,
    last_level_cache_bytes,
    list_devices,
    open_queue,
    resolve_device,
)
from xe2tune.harness._device_process import DeviceProcessSpec
from xe2tune.harness._executor import BufferSet, PlanExecutor
from xe2tune.harness._fit import problem_unfit_reason
from xe2tune.harness._limits import TrialLimits
from xe2tune.harness._peaks import DevicePeaks, catalog_peaks
from xe2tune.harness._roofline import RooflineModel, SdpaWork, sdpa_work, visible_pairs
from xe2tune.harness._runner import ConfigRunner, MeasureRequest, TrialHooks
from xe2tune.harness._supervisor import DeviceProcess, DeviceProcessGone
from xe2tune.measurement import (
    CorrectnessReport,
    RooflineFigures,
    TimingStats,
    TrialResult,
    TrialStatus,
)

__all__ = [
    "CEILING_SETTINGS",
    "BenchSettings",
    "BufferRotation",
    "BufferSet",
    "BuildGate",
    "Ceilings",
    "ConfigRunner",
    "CorrectnessReport",
    "DeviceListing",
    "DevicePeaks",
    "MeasureRequest",
    "PlanExecutor",
    "RooflineFigures",
    "RooflineModel",
    "SdpaWork",
    "TimingStats",
    "TrialHooks",
    "TrialLimits",
    "TrialResult",
    "TrialStatus",
    "DeviceProcessGone",
    "DeviceProcess",
    "DeviceProcessSpec",
    "bench",
    "catalog_peaks",
    "device_caps",
    "device_seconds",
    "last_level_cache_bytes",
    "list_devices",
    "measure_ceilings",
    "measure_copy_bandwidth",
    "open_queue",
    "overlaps_builds",
    "problem_unfit_reason",
    "resolve_device",
    "sdpa_work",
    "visible_pairs",
]
