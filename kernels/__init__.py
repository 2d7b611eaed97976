"""SDPA kernel families: sources under this folder, their configs, spaces and build path.

The names below load with their module on first use (PEP 562): a command that needs only
``ProblemSpec`` or the dtype names does not import NumPy, the families and the build path
(``xe2tune results`` and the other read-side commands start that much sooner).
"""

from __future__ import annotations

from xe2tune._lazy import lazy_exports

# module (under xe2tune.kernels) -> the names it exports here
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_catalog": (
        "CatalogPeaks", "DeviceDescription", "catalog_device", "describe_live_device",
        "device_catalog",
    ),
    "_config": ("LauncherConfig",),
    "_decode": ("DecodeFamily",),
    "_device_caps": ("DeviceCaps",),
    "_family": ("Baseline", "KernelFamily", "KernelLaunch", "LaunchPlan"),
    "_family_union": ("FamilyUnion", "family_source_hash"),
    "_inputs": ("dtype_name", "kv_dtype_name", "make_inputs", "numpy_dtype"),
    "_isa": ("KernelIsa", "ModuleIsa", "iga_platform", "module_isa"),
    "_isa_counts": ("IsaCounts", "count_dpas_loop", "count_isa"),
    "_isa_jobs": (
        "ISA_TIMEOUT_S", "MAX_PARALLEL_COMPILES", "IsaJob", "compile_isa", "compile_isa_all",
        "isa_pool",
    ),
    "_jit": (
        "BuiltProgram", "build_program", "define_flags", "has_matrix_aspect", "source_hash",
        "submit_at_addresses",
    ),
    "_native_build": ("NativeBuildError", "load_extension"),
    "_prefill": ("PrefillFamily",),
    "_problem": (
        "DEFAULT_HEAD_DIM_V", "DTYPES", "ELEMENT_BYTES", "HEAD_DIMS", "HEAD_DIMS_V", "KV_DTYPES",
        "MODES", "ProblemSpec", "default_head_dim_v",
    ),
    "_reference": ("reference_sdpa",),
    "_registry": (
        "families_for", "family_for", "family_for_mode", "family_names", "get_family",
        "search_family",
    ),
    "_rules": ("GridConfigs", "Rule", "ValidGrid"),
    "_spirv": (
        "DEFAULT_GRF", "DOUBLE_GRF", "KernelSpirv", "SpirvError", "SpirvSummary", "parse_spirv",
    ),
    "_spirv_capture": ("CaptureTimeout", "SpirvCapture", "capture_spirv"),
    "_tolerance": ("THRESHOLDS", "check_output"),
    "_xe2_compile": (
        "LARGE_GRF_OPTION", "CompileOutcome", "Verdict", "compile_module", "module_options",
    ),
    "_xe2_compiler": (
        "INSTALL_SCRIPT", "CompilerLookup", "Xe2Compiler", "Xe2CompilerMissing",
        "locate_xe2_compiler",
    ),
    "_xmx_decode": ("XmxDecodeFamily",),
    "_xmx_prefill": ("XmxPrefillFamily",),
    "_zebin": ("Zebin", "ZebinError", "ZeKernelInfo", "read_zebin"),
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, globals())
