"""Runs tests/data/xe_builtins_probe.cpp once in a process whose OpenCL CPU runtime builds
subgroup-16 kernels (started with CL_CONFIG_CPU_VECTORIZER_MODE=0 by
tests/kernels/test_xe_builtins.py).

stdin: {"mat": [uint16 ...], "width", "height", "pitch", "x", "y"} (width, pitch in bytes);
stdout: {"t", "v", "v8", "a", "c", "max", "sum"}, each lane-major as the probe writes them, and "s",
the stored-into surface.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import numpy as np

import xe2tune  # noqa: F401  (sets the runtime environment before dpctl loads)
from xe2tune.harness import open_queue
from xe2tune.kernels import build_program

PROBE = Path(__file__).parent / "data" / "xe_builtins_probe.cpp"


def main() -> int:
    import dpctl.memory as dpm

    request = json.loads(sys.stdin.read())
    queue = open_queue("opencl:cpu")
    built = build_program(queue, str(PROBE), ("xe_builtins_probe",), {"POLICY": 0})
    mat = np.asarray(request["mat"], dtype=np.uint16)
    outputs = {"t": np.int32, "v": np.int32, "v8": np.int32, "a": np.int16, "c": np.float32}
    buffers = {"mat": dpm.MemoryUSMDevice(mat.nbytes, queue=queue)}
    buffers["mat"].copy_from_host(mat.view(np.uint8))
    for name, dtype in outputs.items():
        buffers[name] = dpm.MemoryUSMDevice(16 * 8 * np.dtype(dtype).itemsize, queue=queue)
    for name in ("max", "sum"):
        buffers[name] = dpm.MemoryUSMDevice(16 * 4, queue=queue)
    buffers["s"] = dpm.MemoryUSMDevice(mat.nbytes, queue=queue)
    buffers["s"].copy_from_host(np.zeros_like(mat).view(np.uint8))
    args = [buffers["mat"],
            *(ctypes.c_int32(request[k]) for k in ("width", "height", "pitch", "x", "y")),
            *(buffers[n] for n in ("t", "v", "v8", "a", "c", "max", "sum", "s"))]
    queue.submit(built.kernels["xe_builtins_probe"], args, [16], [16]).wait()
    result = {}
    for name, dtype in {**outputs, "max": np.float32, "sum": np.float32}.items():
        host = np.empty(16 * (8 if name in outputs else 1), dtype=dtype)
        buffers[name].copy_to_host(host.view(np.uint8))
        result[name] = host.tolist()
    stored = np.empty_like(mat)
    buffers["s"].copy_to_host(stored.view(np.uint8))
    result["s"] = stored.tolist()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
