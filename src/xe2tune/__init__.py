"""xe2tune: autotuning and benchmarking of flash-attention (SDPA) SYCL kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xe2tune.config import configure_runtime_env

# The SYCL runtime reads its variables when it loads: set them before anything can import dpctl.
configure_runtime_env()

if TYPE_CHECKING:
    from xe2tune._sdpa import sdpa

__version__ = "0.1.0"
__all__ = ["sdpa", "__version__"]


def __getattr__(name: str) -> Any:
    # sdpa() is device side (dpctl, libsycl): load it on first use, so that the read side
    # (xe2tune.db, .api, .dashboards, and `serve`, `results`, `report`) never loads the runtime.
    if name == "sdpa":
        from xe2tune._sdpa import sdpa

        return sdpa
    raise AttributeError(f"module 'xe2tune' has no attribute {name!r}")
