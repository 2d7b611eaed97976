"""Every environment variable xe2tune reads or sets, in one place.

The SYCL runtime reads its own variables when it loads, so :func:`configure_runtime_env` must run
before the first ``import dpctl``; ``xe2tune/__init__.py`` calls it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP_NAME = "xe2tune"


def cache_dir() -> Path:
    """User cache dir for the native extension and the SYCL persistent kernel cache."""
    override = os.environ.get("XE2TUNE_CACHE_DIR")
    path = Path(override) if override else Path(platformdirs.user_cache_dir(APP_NAME))
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """User data dir for the default database and measured ceilings."""
    override = os.environ.get("XE2TUNE_DATA_DIR")
    path = Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME))
    path.mkdir(parents=True, exist_ok=True)
    return path


def device_filter() -> str | None:
    """The SYCL filter string chosen through ``XE2TUNE_DEVICE``, if any."""
    return os.environ.get("XE2TUNE_DEVICE") or None


def database_url() -> str | None:
    """The SQLAlchemy URL chosen through ``XE2TUNE_DB``, if any."""
    return os.environ.get("XE2TUNE_DB") or None


def set_database_url(url: str) -> None:
    """Make ``url`` the database of this process and the processes it starts (``XE2TUNE_DB``)."""
    os.environ["XE2TUNE_DB"] = url


def api_token() -> str | None:
    """The bearer token that enables ``POST /v1/results`` (``XE2TUNE_API_TOKEN``)."""
    return os.environ.get("XE2TUNE_API_TOKEN") or None


def _installed_opencl_cpu_runtime() -> Path | None:
    # intel-opencl-rt installs libintelocl.so into <prefix>/lib, but its bundled ICD file names a
    # build-machine prefix, so the ICD loader never finds it unless we point at it.
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        candidate = Path(prefix) / "lib" / "libintelocl.so"
        if candidate.exists():
            return candidate
    return None


def configure_runtime_env() -> None:
    """Set the SYCL/OpenCL runtime variables we rely on, never overriding the user's own."""
    if "OCL_ICD_FILENAMES" not in os.environ:
        runtime = _installed_opencl_cpu_runtime()
        if runtime is not None:
            os.environ["OCL_ICD_FILENAMES"] = str(runtime)
    # The OpenCL CPU runtime's implicit vectorizer packetizes kernels across work-items; the SDPA
    # kernels vectorize explicitly (sycl::vec), where packetizing only multiplies build time
    # (45-90 s instead of ~8 s per config) at no gain. Kernels must then not request a sub-group
    # size (the runtime rejects that combination).
    os.environ.setdefault("CL_CONFIG_CPU_VECTORIZER_MODE", "1")
    os.environ.setdefault("SYCL_CACHE_PERSISTENT", "1")
    os.environ.setdefault("SYCL_CACHE_DIR", str(cache_dir() / "sycl"))
