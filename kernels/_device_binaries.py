"""Device binaries of run-time builds, kept on disk so that a build costs its compile once.

The SYCL runtime's persistent cache keeps each build's front-end bitcode and the device binary
of the SPIR-V made from it, but a build served from that bitcode makes other SPIR-V than the
fresh build that stored it (docs/cpu-runtime.md), so every config met the CPU back end twice:
in the first process that built it and in the next. Keeping the binary the device's driver
returned for the first build (OpenCL's program binary) and loading it in later processes makes
every later build a load of that same machine code, a millisecond instead of 0.2-3 s.

An entry is a function of the compiled text, the headers, the options, the device and its
driver, the runtime, the CPU runtime's settings (``CL_CONFIG_*``) and the host CPU's
instruction sets (a CPU device's name may not tell an AVX2 part from an AVX-512 one). Only the
OpenCL backend hands out program binaries; elsewhere nothing is kept. Off wherever the
runtime's own cache is off, or images are being dumped: those processes want every build done
anew (kernels/_spirv_capture.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xe2tune.config import (
    cpu_runtime_settings,
    device_binaries_dir,
    sycl_dump_images_on,
    sycl_persistent_cache_on,
)
from xe2tune.kernels._cache_files import cache_key, runtime_versions, write_atomically
from xe2tune.kernels._native_build import load_extension

if TYPE_CHECKING:
    import dpctl

_FORMAT = 1


@dataclass(frozen=True)
class KeptBuild:
    """A build as kept: the driver's binary of each of its programs (a build may split its
    kernels into several), where each kernel is, the build's log and spills."""

    binaries: tuple[bytes, ...]
    kernels: Mapping[str, tuple[int, str]]  # kernel name as asked for -> (program, its name there)
    log: str
    spill_bytes: Mapping[str, int]

    def to_bytes(self) -> bytes:
        header = json.dumps({"format": _FORMAT, "sizes": [len(b) for b in self.binaries],
                             "kernels": {name: list(at) for name, at in self.kernels.items()},
                             "log": self.log, "spill_bytes": dict(self.spill_bytes)})
        return header.encode() + b"\n" + b"".join(self.binaries)

    @classmethod
    def from_bytes(cls, data: bytes) -> KeptBuild | None:
        """The entry ``data`` holds, None if it is not one of this format (or not whole)."""
        header, _, rest = data.partition(b"\n")
        try:
            fields = json.loads(header)
            sizes = [int(n) for n in fields["sizes"]]
            kernels = {str(name): (int(i), str(symbol))
                       for name, (i, symbol) in fields["kernels"].items()}
            if (fields["format"] != _FORMAT or sum(sizes) != len(rest) or 0 in sizes
                    or any(not 0 <= i < len(sizes) for i, _ in kernels.values())):
                return None
            offsets = [sum(sizes[:i]) for i in range(len(sizes))]
            return cls(tuple(rest[o:o + n] for o, n in zip(offsets, sizes, strict=True)),
                       kernels, str(fields["log"]),
                       {str(k): int(n) for k, n in fields["spill_bytes"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def binaries_kept() -> bool:
    """Whether this process keeps and loads device binaries (module docstring)."""
    return sycl_persistent_cache_on() and not sycl_dump_images_on()


@functools.cache
def _host_cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next((line for line in cpuinfo if line.startswith("flags")), "").strip()
    except OSError:
        return ""


def binary_path(device_key: str, text: str, headers: Sequence[tuple[str, str]],
                kernel_names: Sequence[str], options: Sequence[str]) -> Path:
    """Where the device binary of this build is kept."""
    fields: dict[str, Any] = {
        "device": device_key, "text": text, "headers": [list(h) for h in headers],
        "kernels": list(kernel_names), "options": list(options),
        "runtime": runtime_versions(), "host_cpu": _host_cpu_flags(), "format": _FORMAT,
        "cpu_runtime_settings": cpu_runtime_settings(),
    }
    return device_binaries_dir() / f"{cache_key(fields)}.bin"


def load_kernels(queue: dpctl.SyclQueue, path: Path, kernel_names: Sequence[str],
                 ) -> tuple[dict[str, Any], KeptBuild] | None:
    """The kernels (name -> dpctl.program.SyclKernel) of the build kept at ``path`` and its
    entry; None if none is kept, or the driver refuses it (it is then built anew and replaced).
    """
    try:
        entry = KeptBuild.from_bytes(path.read_bytes())
    except OSError:
        return None
    if entry is None or set(kernel_names) - set(entry.kernels):
        return None
    ext = load_extension()
    kernels: dict[str, Any] = {}
    try:
        for index, binary in enumerate(entry.binaries):
            names = [name for name in kernel_names if entry.kernels[name][0] == index]
            loaded = ext.load_program_binary(queue, binary,
                                             [entry.kernels[name][1] for name in names])
            kernels.update((name, loaded[entry.kernels[name][1]]) for name in names)
    except RuntimeError:
        return None
    return {name: kernels[name] for name in kernel_names}, entry


def keep_build(queue: dpctl.SyclQueue, path: Path, kernels: Mapping[str, Any], log: str,
               spill_bytes: Mapping[str, int]) -> None:
    """Keep the device binaries of a build's ``kernels`` at ``path``, whole or not at all.

    Nothing is kept where the backend hands out no binary, the driver refuses to, or the disk
    does: the build itself stands, only a later process compiles it again.
    """
    names = list(kernels)
    try:
        binaries, symbols, programs = load_extension().program_binaries(
            queue, [kernels[n] for n in names])
        if binaries:
            entry = KeptBuild(tuple(binaries), dict(zip(names, zip(programs, symbols, strict=True),
                                                        strict=True)), log, spill_bytes)
            write_atomically(path, entry.to_bytes())
    except (RuntimeError, OSError):
        pass
