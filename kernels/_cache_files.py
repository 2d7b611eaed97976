"""Files of the kernel caches on disk (captured SPIR-V, Xe2 compiler outcomes): named by what
their content is a function of, and each written whole or not at all, so that a process killed
mid-write, or two writing the same entry, never leave a truncated one for the next reader."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def cache_key(fields: Mapping[str, Any]) -> str:
    """An entry's name: sha256 of ``fields`` (JSON values) in a canonical order."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@functools.cache
def runtime_versions() -> tuple[str, ...]:
    """The SYCL runtime's version (the front end) and the OpenCL CPU runtime's (the CPU back
    end): builds are a function of both."""
    versions = []
    for dist in ("intel-sycl-rt", "intel-opencl-rt"):
        try:
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return tuple(versions)


def write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f"{path.name}.{time.monotonic_ns()}.partial")
    partial.write_bytes(data)
    partial.replace(path)
