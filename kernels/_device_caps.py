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
