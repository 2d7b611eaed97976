"""xe2tune: autotuning and benchmarking of flash-attention (SDPA) SYCL kernels."""

from __future__ import annotations

from xe2tune.config import configure_runtime_env

configure_runtime_env()

from xe2tune._sdpa import sdpa  # noqa: E402  (the runtime env must be set before dpctl loads)

__version__ = "0.1.0"
__all__ = ["sdpa", "__version__"]
