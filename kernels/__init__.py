"""SDPA kernel families: sources under this folder, their configs, spaces and build path."""

from __future__ import annotations

from xe2tune.kernels._catalog import (
    CatalogPeaks,
    DeviceDescription,
    catalog_device,
    describe_live_device,
    device_catalog,
)
from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._decode import DecodeFamily
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import Baseline, KernelFamily, KernelLaunch, LaunchPlan
from xe2tune.kernels._family_union import FamilyUnion, family_source_hash
from xe2tune.kernels._inputs import dtype_name, make_inputs, numpy_dtype
from xe2tune.kernels._jit import (
    BuiltProgram,
    build_program,
    define_flags,
    has_matrix_aspect,
    source_hash,
)
from xe2tune.kernels._native_build import NativeBuildError, load_extension
from xe2tune.kernels._ocloc import LARGE_GRF_OPTION, OclocReport, ocloc_compile, ocloc_path
from xe2tune.kernels._prefill import PrefillFamily
from xe2tune.kernels._problem import DTYPES, ELEMENT_BYTES, HEAD_DIMS, MODES, ProblemSpec
from xe2tune.kernels._reference import reference_sdpa
from xe2tune.kernels._registry import (
    families_for,
    family_for,
    family_for_mode,
    family_names,
    get_family,
    search_family,
)
from xe2tune.kernels._spirv import (
    DEFAULT_GRF,
    DOUBLE_GRF,
    KernelSpirv,
    SpirvError,
    SpirvSummary,
    parse_spirv,
)
from xe2tune.kernels._spirv_capture import CaptureTimeout, SpirvCapture, capture_spirv
from xe2tune.kernels._tolerance import THRESHOLDS, check_output
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily

__all__ = [
    "DEFAULT_GRF",
    "DOUBLE_GRF",
    "LARGE_GRF_OPTION",
    "DTYPES",
    "ELEMENT_BYTES",
    "HEAD_DIMS",
    "MODES",
    "THRESHOLDS",
    "XmxDecodeFamily",
    "XmxPrefillFamily",
    "Baseline",
    "BuiltProgram",
    "CaptureTimeout",
    "CatalogPeaks",
    "DeviceDescription",
    "FamilyUnion",
    "DecodeFamily",
    "DeviceCaps",
    "KernelFamily",
    "KernelLaunch",
    "KernelSpirv",
    "LaunchPlan",
    "NativeBuildError",
    "LauncherConfig",
    "OclocReport",
    "PrefillFamily",
    "ProblemSpec",
    "SpirvCapture",
    "SpirvError",
    "SpirvSummary",
    "build_program",
    "capture_spirv",
    "catalog_device",
    "describe_live_device",
    "device_catalog",
    "check_output",
    "define_flags",
    "dtype_name",
    "families_for",
    "family_for",
    "family_for_mode",
    "family_names",
    "family_source_hash",
    "get_family",
    "has_matrix_aspect",
    "load_extension",
    "make_inputs",
    "numpy_dtype",
    "ocloc_compile",
    "ocloc_path",
    "parse_spirv",
    "reference_sdpa",
    "search_family",
    "source_hash",
]
