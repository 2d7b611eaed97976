"""Files of the kernel caches on disk (captured SPIR-V, Xe2 compiler outcomes): each written
whole or not at all, so that a process killed mid-write, or two writing the same entry, never
leave a truncated one for the next reader."""

from __future__ import annotations

import time
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f"{path.name}.{time.monotonic_ns()}.partial")
    partial.write_bytes(data)
    partial.replace(path)
