"""Recorded search spaces for the replay, score and sampler tests: the shared examples and
small synthetic Kernel Tuner cache files written on the fly."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SHARED_SPACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "spaces"
EXAMPLES = {
    # file stem: (entries, failed)
    "convolution_milo_A100": (4362, 161),
    "pnpoly_RTX_3090": (4092, 318),
}


def example(stem: str) -> Path:
    """Path of a shared example space; skips the test where the shared folder is absent."""
    path = SHARED_SPACES / f"{stem}.json.gz"
    if not path.exists():
        pytest.skip(f"shared example space {path} not present")
    return path


def write_cache(
    path: Path,
    params: dict[str, list[Any]],
    time_of: Callable[[dict[str, Any]], float | str | None],
    *,
    gz: bool = False,
    costs: bool = True,
) -> Path:
    """Write a Kernel Tuner cache file: ``time_of(config)`` is the mean time, a failure string
    (e.g. ``"RuntimeFailedConfig"``), or None for a config outside the restrictions (absent).
    Raw samples are the mean and the mean +- 10 %; with ``costs``, every entry also records
    Kernel Tuner's cost fields (compile 100 ms, framework 5 ms, ...), as real caches do. Without
    ``costs`` an entry records no time spent at all (no raw samples either)."""
    cache = {}
    for values in itertools.product(*params.values()):
        config = dict(zip(params, values, strict=True))
        time = time_of(config)
        if time is None:
            continue
        entry: dict[str, Any] = dict(config, time=time)
        if costs and not isinstance(time, str):
            entry["times"] = [0.9 * time, time, 1.1 * time]
        if costs:
            entry.update(compile_time=100.0, verification_time=0, strategy_time=0,
                         framework_time=5.0, benchmark_time=3.3 * time if entry.get("times") else 0)
        cache[",".join(str(v) for v in values)] = entry
    data = {
        "device_name": "Synthetic",
        "kernel_name": "synthetic",
        "problem_size": [1],
        "tune_params_keys": list(params),
        "tune_params": params,
        "objective": "time",
        "cache": cache,
    }
    raw = json.dumps(data).encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


SYNTHETIC_PARAMS = {"x": list(range(12)), "y": list(range(10)), "z": [1, 2, 4, 8]}


def synthetic_time(config: dict[str, Any]) -> float | str | None:
    """A smooth bowl with one optimum at (x=7, y=3, z=4); some configs restricted or failing."""
    x, y, z = config["x"], config["y"], config["z"]
    if (x + y) % 7 == 6:
        return None
    if x == 0 and z == 8:
        return "RuntimeFailedConfig"
    return 1.0 + 0.05 * (x - 7) ** 2 + 0.08 * (y - 3) ** 2 + 0.3 * abs(z - 4) / 4
