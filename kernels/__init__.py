"""SDPA kernel families: sources under this folder, their configs, spaces and build path."""

from __future__ import annotations

from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._decode import DecodeFamily
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import KernelFamily, KernelLaunch, LaunchPlan
from xe2tune.kernels._inputs import dtype_name, make_inputs, numpy_dtype
from xe2tune.kernels._jit import BuiltProgram, build_program, define_flags, source_hash
from xe2tune.kernels._prefill import PrefillFamily
from xe2tune.kernels._problem import DTYPES, HEAD_DIMS, MODES, ProblemSpec
from xe2tune.kernels._reference import reference_sdpa
from xe2tune.kernels._registry import family_for_mode, family_names, get_family
from xe2tune.kernels._tolerance import THRESHOLDS, check_output

__all__ = [
    "DTYPES",
    "HEAD_DIMS",
    "MODES",
    "THRESHOLDS",
    "BuiltProgram",
    "DecodeFamily",
    "DeviceCaps",
    "KernelFamily",
    "KernelLaunch",
    "LaunchPlan",
    "LauncherConfig",
    "PrefillFamily",
    "ProblemSpec",
    "build_program",
    "check_output",
    "define_flags",
    "dtype_name",
    "family_for_mode",
    "family_names",
    "get_family",
    "make_inputs",
    "numpy_dtype",
    "reference_sdpa",
    "source_hash",
]
