"""Every environment variable xe2tune reads or sets, in one place.

The SYCL runtime reads its own variables when it loads, so :func:`configure_runtime_env` must run
before the first ``import dpctl``; ``xe2tune/__init__.py`` calls it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import platformdirs

from xe2tune.errors import InvalidConfig

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


def ocloc_override() -> str | None:
    """The ``ocloc`` named through ``XE2TUNE_OCLOC`` (a path), if any."""
    return os.environ.get("XE2TUNE_OCLOC") or None


def xe2_compiler_dir() -> Path:
    """Where ``scripts/install-xe2-compiler`` installs Intel's Xe2 compiler by default.

    The script's own rule: ``XE2TUNE_XE2_COMPILER_DIR``, else
    ``${XDG_CACHE_HOME:-$HOME/.cache}/xe2tune/xe2-compiler`` (not :func:`cache_dir`: the
    script knows nothing of ``XE2TUNE_CACHE_DIR``).
    """
    override = os.environ.get("XE2TUNE_XE2_COMPILER_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / APP_NAME / "xe2-compiler"


def _cache_subdir(name: str) -> Path:
    path = cache_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def isa_cache_dir() -> Path:
    """User cache dir of the Xe2 compiler's outcomes (one per SPIR-V, target, options, version)."""
    return _cache_subdir("isa")


def spirv_cache_dir() -> Path:
    """User cache dir of captured SPIR-V (one per source, defines, options and runtime)."""
    return _cache_subdir("spirv")


def device_binaries_dir() -> Path:
    """User cache dir of the device binaries of run-time builds (kernels/_device_binaries.py)."""
    return _cache_subdir("device-binaries")


def sycl_dump_images_on() -> bool:
    """Whether this process's SYCL runtime dumps the device images it builds
    (``SYCL_DUMP_IMAGES``, which :func:`spirv_capture_env` sets for capture children)."""
    return bool(os.environ.get("SYCL_DUMP_IMAGES"))


def cpu_runtime_settings() -> list[tuple[str, str]]:
    """The OpenCL CPU runtime's settings in this process's environment (``CL_CONFIG_*``),
    sorted: its builds are a function of them."""
    return sorted((k, v) for k, v in os.environ.items() if k.startswith("CL_CONFIG_"))


def sycl_persistent_cache_on() -> bool:
    """Whether the SYCL runtime keeps builds on disk (``SYCL_CACHE_PERSISTENT``, which
    :func:`configure_runtime_env` turns on unless the user set it)."""
    return os.environ.get("SYCL_CACHE_PERSISTENT") != "0"


def device_filter() -> str | None:
    """The SYCL filter string chosen through ``XE2TUNE_DEVICE``, if any."""
    return os.environ.get("XE2TUNE_DEVICE") or None


def database_url() -> str | None:
    """The SQLAlchemy URL chosen through ``XE2TUNE_DB``, if any."""
    return os.environ.get("XE2TUNE_DB") or None


def set_database_url(url: str) -> None:
    """Make ``url`` the database of this process and the processes it starts (``XE2TUNE_DB``)."""
    os.environ["XE2TUNE_DB"] = url


def cpu_vectorizer_mode() -> str:
    """``CL_CONFIG_CPU_VECTORIZER_MODE`` as the OpenCL CPU runtime of this process read it.

    The runtime reads it once when it loads; "1" forbids kernels with a required subgroup size.
    """
    return os.environ.get("CL_CONFIG_CPU_VECTORIZER_MODE", "0")


def spirv_capture_env(vectorizer_mode: str) -> dict[str, str]:
    """The environment of a child process that dumps the SPIR-V of its builds (into its cwd)."""
    # Images are dumped on persistent-cache hits too.
    return {**child_runtime_env(vectorizer_mode), "SYCL_DUMP_IMAGES": "1"}


def child_runtime_env(vectorizer_mode: str) -> dict[str, str]:
    """This process's environment for a child whose CPU runtime runs in ``vectorizer_mode``.

    Mode "0" is the one in which kernels with a required subgroup size (the xmx families' on
    opencl:cpu) build; the child gets that mode's own persistent kernel cache.
    """
    return {**os.environ, "CL_CONFIG_CPU_VECTORIZER_MODE": vectorizer_mode,
            "SYCL_CACHE_DIR": str(sycl_cache_dir(vectorizer_mode))}


def api_token() -> str | None:
    """The bearer token that enables ``POST /v1/results`` (``XE2TUNE_API_TOKEN``)."""
    return os.environ.get("XE2TUNE_API_TOKEN") or None


def worker_token() -> str | None:
    """The credential a remote worker presents to the gRPC proxy and ``POST /v1/results``:
    ``XE2TUNE_WORKER_TOKEN`` (a campaign's worker token), else ``XE2TUNE_API_TOKEN``."""
    return os.environ.get("XE2TUNE_WORKER_TOKEN") or api_token()


def allowed_hosts() -> tuple[str, ...]:
    """Host names the API answers to besides loopback (``XE2TUNE_ALLOWED_HOSTS``, by commas)."""
    text = os.environ.get("XE2TUNE_ALLOWED_HOSTS", "")
    return tuple(name.strip() for name in text.split(",") if name.strip())


def set_allowed_hosts(names: tuple[str, ...]) -> None:
    """Make ``names`` the API's extra host names here and in the processes it starts."""
    os.environ["XE2TUNE_ALLOWED_HOSTS"] = ",".join(names)


def replay_max_bytes() -> int | None:
    """Cap on a replayed space file's decompressed size (``XE2TUNE_REPLAY_MAX_BYTES``), if set.

    Raises:
        ValueError: the variable is set but is not a positive integer.
    """
    text = os.environ.get("XE2TUNE_REPLAY_MAX_BYTES")
    if not text:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"XE2TUNE_REPLAY_MAX_BYTES must be a positive integer, got {text!r}")
    return int(text)


def build_timeout_s() -> float | None:
    """The per-build time limit chosen through ``XE2TUNE_BUILD_TIMEOUT`` (seconds), if any.

    Raises:
        InvalidConfig: if the value is not a positive number.
    """
    text = os.environ.get("XE2TUNE_BUILD_TIMEOUT")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise InvalidConfig(
            f"XE2TUNE_BUILD_TIMEOUT must be a positive number of seconds, got {text!r}")
    return value


PLANTED_FAULTS = ("build_hang", "run_hang", "crash", "wrong_result")


def planted_faults() -> dict[str, str]:
    """TEST-ONLY: faults the device process plants, from ``XE2TUNE_FAULTS``.

    A JSON object mapping a config hash to one of :data:`PLANTED_FAULTS`: "build_hang" (the build
    step never returns), "run_hang" (the timed step never returns), "crash" (the device process
    kills itself with SIGSEGV mid-trial), "wrong_result" (the output is corrupted before the check).
    Only the supervised device process obeys it; it exists so tests can show that a search
    survives what a real kernel or runtime can do. Never set it outside tests.

    Raises:
        InvalidConfig: if the value is not such an object.
    """
    text = os.environ.get("XE2TUNE_FAULTS")
    if not text:
        return {}
    try:
        faults = json.loads(text)
    except json.JSONDecodeError:
        faults = None
    if not isinstance(faults, dict) or not all(
            isinstance(k, str) and v in PLANTED_FAULTS for k, v in faults.items()):
        raise InvalidConfig("XE2TUNE_FAULTS must be a JSON object mapping config hashes to one "
                            f"of {', '.join(PLANTED_FAULTS)}")
    return faults


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
    mode = os.environ.setdefault("CL_CONFIG_CPU_VECTORIZER_MODE", "1")
    os.environ.setdefault("SYCL_CACHE_PERSISTENT", "1")
    os.environ.setdefault("SYCL_CACHE_DIR", str(sycl_cache_dir(mode)))


def sycl_cache_dir(vectorizer_mode: str) -> Path:
    """The SYCL persistent kernel cache of processes whose CPU runtime runs in this mode.

    The runtime's cache key ignores the vectorizer mode (seen: a mode-1 process loaded a binary
    built under mode 0), so each mode gets a cache of its own, or binaries built for one mode
    would be served to the processes that measure in the other.
    """
    return cache_dir() / ("sycl" if vectorizer_mode == "1" else f"sycl-vectorizer{vectorizer_mode}")
