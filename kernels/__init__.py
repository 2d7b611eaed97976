"""SDPA kernel families: sources under this folder, their configs, spaces and build path."""

from __future__ import annotations

from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import KernelFamily, KernelLaunch, LaunchPlan
from xe2tune.kernels._jit import BuiltProgram, build_program, define_flags, source_hash
from xe2tune.kernels._problem import DTYPES, HEAD_DIMS, MODES, ProblemSpec

__all__ = [
    "DTYPES",
    "HEAD_DIMS",
    "MODES",
    "BuiltProgram",
    "DeviceCaps",
    "KernelFamily",
    "KernelLaunch",
    "LaunchPlan",
    "LauncherConfig",
    "ProblemSpec",
    "build_program",
    "define_flags",
    "source_hash",
]
