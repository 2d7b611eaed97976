"""The device limits a config is validated against before it is built."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceCaps:
    """What a kernel family needs to know about a device to validate a config.

    Built from a live ``dpctl.SyclDevice`` by :func:`xe2tune.harness.device_caps`, or taken from
    the catalog of device descriptions (:func:`xe2tune.kernels.catalog_device`) for a device that
    is not here; validation is the same pure function of these fields either way. Kept free of
    dpctl so tests can state limits directly.
    """

    name: str
    backend: str
    device_type: str
    max_work_group_size: int
    sub_group_sizes: tuple[int, ...]
    local_mem_bytes: int
    compute_units: int
    global_mem_bytes: int
    has_fp16: bool = True
    has_bf16: bool = True
    # XMX / AMX engines reachable through joint_matrix (the ext_intel_matrix aspect).
    has_matrix_engine: bool = False
    # The SIMD register file the vector-lane tile ops run on (CPU runtimes): fp32 lanes per
    # native vector and how many such registers there are (AVX2: 8 x 16, AVX-512: 16 x 32).
    simd_width: int = 8
    simd_registers: int = 16
    # Intel GPU general register file: registers of register_bytes per thread (one thread runs
    # a subgroup), the sizes a kernel may ask for (Xe2: 128, or 256 with grf_size<256> =
    # "doubleGRF"); empty where there is no such model (CPUs).
    is_intel_gpu: bool = False
    registers_per_thread: tuple[int, ...] = ()
    register_bytes: int = 64
    # Work-items a work-group may hold with 256 registers per thread (Xe2: 32 subgroups of 16).
    max_work_items_large_grf: int = 0
    # (M, N, K) of one matrix-engine multiply-add for fp16/bf16 (Xe2 DPAS: 8 x 16 x 16).
    matrix_shape: tuple[int, int, int] = (0, 0, 0)
    # False when a kernel with a required subgroup size cannot be built here: the OpenCL CPU
    # runtime started with CL_CONFIG_CPU_VECTORIZER_MODE=1 (read once, when it loads).
    required_subgroup_size_ok: bool = True
    aspects: tuple[str, ...] = ()

    def vector_registers(self, lanes: int) -> int:
        """How many sycl::vec<float, lanes> values the register file holds at once."""
        return max(1, self.simd_registers * min(lanes, self.simd_width) // lanes)
