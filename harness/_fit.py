"""Whether a problem can be measured at all here, decided before any trial.

Failures that belong to the problem rather than the config (the float64 reference does not fit
in the host's memory, the rotated buffers do not fit the device) would otherwise fail every
config of the study, or kill the device process, one trial at a time.
"""

from __future__ import annotations

import os
from pathlib import Path

from xe2tune.kernels import ELEMENT_BYTES, DeviceCaps, ProblemSpec

# reference_sdpa holds score-sized float64 arrays of one (batch, KV head) at a time; tracemalloc
# measured a peak of 4.7 of them (scores, masked scores, the shifted scores, exponentials).
REFERENCE_SCORE_ARRAYS = 5


def reference_bytes(problem: ProblemSpec) -> int:
    """Host memory the inputs and the float64 reference take at their peak."""
    p = problem
    scores = 8 * p.group_size * p.q_len * p.kv_len
    output = 8 * p.batch * p.q_len * p.heads_q * p.head_dim_v
    return REFERENCE_SCORE_ARRAYS * scores + output + buffer_set_bytes(problem)


def buffer_set_bytes(problem: ProblemSpec) -> int:
    """Q and O in the problem's dtype, K and V in their element dtype (FP8: one byte), and the
    FP8 scales, of one buffer set (a config's scratch excluded)."""
    p = problem
    qo = p.batch * p.q_len * p.heads_q * (p.head_dim + p.head_dim_v)
    kv = p.batch * p.kv_len * p.heads_kv * (p.head_dim + p.head_dim_v)
    scales = 4 * 2 * p.heads_kv if p.kv_dtype is not None else 0
    return ELEMENT_BYTES[p.dtype] * qo + ELEMENT_BYTES[p.kv_element_dtype] * kv + scales


def host_available_bytes() -> int:
    """Memory the host can still give (``MemAvailable``), else its free physical pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def problem_unfit_reason(problem: ProblemSpec, caps: DeviceCaps, *, n_buf: int = 4,
                         available_bytes: int | None = None) -> str | None:
    """None if the problem can be measured on this device and host, else a one-line reason.

    ``n_buf`` is the bench settings' least number of rotated buffer sets; ``available_bytes``
    the host memory to plan with (default: :func:`host_available_bytes`). On a CPU device the
    buffers live in host memory too, next to the reference.

    Raises:
        Nothing: every misfit is a reason string.
    """
    device_need = n_buf * buffer_set_bytes(problem)
    if device_need > caps.global_mem_bytes:
        return (f"the problem's {n_buf} rotated buffer sets need {_gib(device_need)} of device "
                f"memory; {caps.name} has {_gib(caps.global_mem_bytes)}")
    available = host_available_bytes() if available_bytes is None else available_bytes
    reference = reference_bytes(problem)
    on_host = device_need if caps.device_type == "cpu" else 0
    if reference + on_host > available:
        also = f" (plus {_gib(on_host)} of buffers on the CPU device)" if on_host else ""
        return (f"the float64 reference needs {_gib(reference)} of host memory{also}; "
                f"{_gib(available)} is available")
    return None
