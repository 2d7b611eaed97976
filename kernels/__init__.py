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
from xe2tune.kernels._inputs import dtype_name, kv_dtype_name, make_inputs, numpy_dtype
from xe2tune.kernels._isa import KernelIsa, ModuleIsa, iga_platform, module_isa
from xe2tune.kernels._isa_counts import IsaCounts, count_dpas_loop, count_isa
from xe2tune.kernels._isa_jobs import (
    ISA_TIMEOUT_S,
    MAX_PARALLEL_COMPILES,
    IsaJob,
    compile_isa,
    compile_isa_all,
    isa_pool,
)
from xe2tune.kernels._jit import (
    BuiltProgram,
    build_program,
    define_flags,
    has_matrix_aspect,
    source_hash,
    submit_at_addresses,
)
from xe2tune.kernels._native_build import NativeBuildError, load_extension
from xe2tune.kernels._prefill import PrefillFamily
from xe2tune.kernels._problem import (
    DEFAULT_HEAD_DIM_V,
    DTYPES,
    ELEMENT_BYTES,
    HEAD_DIMS,
    HEAD_DIMS_V,
    KV_DTYPES,
    MODES,
    ProblemSpec,
    default_head_dim_v,
)
from xe2tune.kernels._reference import reference_sdpa
from xe2tune.kernels._registry import (
    families_for,
    family_for,
    family_for_mode,
    family_names,
    get_family,
    search_family,
)
from xe2tune.kernels._rules import GridConfigs, Rule, ValidGrid
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
from xe2tune.kernels._xe2_compile import (
    LARGE_GRF_OPTION,
    CompileOutcome,
    Verdict,
    compile_module,
    module_options,
)
from xe2tune.kernels._xe2_compiler import (
    INSTALL_SCRIPT,
    CompilerLookup,
    Xe2Compiler,
    Xe2CompilerMissing,
    locate_xe2_compiler,
)
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily
from xe2tune.kernels._zebin import Zebin, ZebinError, ZeKernelInfo, read_zebin

__all__ = [
    "DEFAULT_HEAD_DIM_V",
    "DEFAULT_GRF",
    "DOUBLE_GRF",
    "INSTALL_SCRIPT",
    "ISA_TIMEOUT_S",
    "LARGE_GRF_OPTION",
    "MAX_PARALLEL_COMPILES",
    "DTYPES",
    "ELEMENT_BYTES",
    "HEAD_DIMS",
    "HEAD_DIMS_V",
    "KV_DTYPES",
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
    "GridConfigs",
    "Rule",
    "ValidGrid",
    "DecodeFamily",
    "DeviceCaps",
    "KernelFamily",
    "KernelLaunch",
    "KernelSpirv",
    "LaunchPlan",
    "NativeBuildError",
    "LauncherConfig",
    "ModuleIsa",
    "KernelIsa",
    "IsaCounts",
    "IsaJob",
    "CompileOutcome",
    "CompilerLookup",
    "Verdict",
    "Xe2Compiler",
    "Xe2CompilerMissing",
    "ZeKernelInfo",
    "Zebin",
    "ZebinError",
    "PrefillFamily",
    "ProblemSpec",
    "SpirvCapture",
    "SpirvError",
    "SpirvSummary",
    "build_program",
    "submit_at_addresses",
    "capture_spirv",
    "catalog_device",
    "describe_live_device",
    "device_catalog",
    "check_output",
    "default_head_dim_v",
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
    "kv_dtype_name",
    "make_inputs",
    "numpy_dtype",
    "compile_isa",
    "compile_isa_all",
    "compile_module",
    "count_dpas_loop",
    "count_isa",
    "iga_platform",
    "isa_pool",
    "locate_xe2_compiler",
    "module_isa",
    "module_options",
    "read_zebin",
    "parse_spirv",
    "reference_sdpa",
    "search_family",
    "source_hash",
]
