"""The device limits a config is validated against before it is built."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceCaps:
    """What a kernel family needs to know about a device to validate a config.

    Built from a ``dpctl.SyclDevice`` by :func:`xe2tune.harness.device_caps`; kept free of dpctl
    so validation is a pure function and tests can state limits directly.
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
    has_matrix_engine: bool = False
    # The SIMD register file the vector-lane tile ops run on (CPU runtimes): fp32 lanes per
    # native vector and how many such registers there are (AVX2: 8 x 16, AVX-512: 16 x 32).
    simd_width: int = 8
    simd_registers: int = 16

    def vector_registers(self, lanes: int) -> int:
        """How many sycl::vec<float, lanes> values the register file holds at once."""
        return max(1, self.simd_registers * min(lanes, self.simd_width) // lanes)
