"""Optional: register allocation and spills of captured SPIR-V, from Intel's offline compiler.

``ocloc`` (Debian: ``intel-opencl-icd``) compiles SPIR-V for the GPUs it knows (dg2, pvc, ...;
the 22.43 release knows no Xe2 target and rejects cooperative-matrix SPIR-V). IGC reports a
kernel that exceeds its registers as ``kernel <name> compiled SIMD<w> allocated <r> regs and
spilled around <n>``; a kernel without that warning fits its registers. Every figure is for the
target it was compiled for, never for the device the tuner runs on.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xe2tune.kernels._spirv import DOUBLE_GRF, SYCL_KERNEL_PREFIX, SpirvSummary

LARGE_GRF_OPTION = "-cl-intel-256-GRF-per-thread"
_SPILL = re.compile(
    r"kernel (?P<kernel>\S+)\s+compiled SIMD(?P<simd>\d+) allocated (?P<regs>\d+) regs and "
    r"spilled around (?P<spill>\d+)")


@dataclass(frozen=True)
class OclocSpill:
    """One kernel IGC had to spill: SIMD width, registers allocated, IGC's spill estimate."""

    kernel: str
    simd: int
    registers: int
    spill_estimate: int


@dataclass(frozen=True)
class OclocReport:
    """ocloc's verdict on one SPIR-V module for one target.

    ``error`` is set when ocloc could not compile the module (then ``spills`` is empty);
    otherwise ``spills`` lists the kernels that spilled and every other kernel fits.
    """

    target: str
    version: str
    options: tuple[str, ...]
    kernels: tuple[str, ...]  # the module's kernels (source names)
    spills: tuple[OclocSpill, ...]
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, labelled with the target and ocloc version."""
        return {"target": self.target, "ocloc_version": self.version,
                "options": list(self.options), "kernels": list(self.kernels),
                "spills": [vars(s) for s in self.spills], "error": self.error}

    def text(self) -> str:
        """One line for people, always naming the target it was compiled for."""
        if self.error is not None:
            return self.error
        where = f"ocloc {self.version} for {self.target}"
        if not self.spills:
            return f"{where}: no kernel spills ({', '.join(self.options) or 'default GRF'})"
        return f"{where}: " + "; ".join(
            f"{s.kernel} SIMD{s.simd} allocated {s.registers} regs, spilled around "
            f"{s.spill_estimate}" for s in self.spills)


def ocloc_path() -> str | None:
    """The ``ocloc`` binary on PATH, if any."""
    return shutil.which("ocloc")


def _version(ocloc: str, scratch: Path, timeout_s: float) -> str:
    # `ocloc query OCL_DRIVER_VERSION` writes the version into a file of that name in its cwd.
    subprocess.run([ocloc, "query", "OCL_DRIVER_VERSION"], cwd=scratch, capture_output=True,
                   timeout=timeout_s)
    found = scratch / "OCL_DRIVER_VERSION"
    # The file ends in a nul byte.
    return found.read_text().strip("\0\n ") if found.exists() else "unknown version"


def ocloc_compile(
    image: bytes, summary: SpirvSummary, *, target: str, timeout_s: float = 300.0
) -> OclocReport:
    """Compile one captured SPIR-V module with ocloc for ``target`` and read IGC's spills.

    The module is compiled with 256 registers per thread when one of its kernels asks for them
    (``grf_size<256>``), as the runtime would compile it.

    A module ocloc cannot compile (or that takes it longer than ``timeout_s``) gives a report
    whose ``error`` says so, labelled with the ocloc version and target.

    Raises:
        FileNotFoundError: if there is no ``ocloc`` on PATH (check :func:`ocloc_path` first).
    """
    ocloc = ocloc_path()
    if ocloc is None:
        raise FileNotFoundError("no ocloc on PATH (Debian: apt-get install intel-opencl-icd)")
    large = any(k.register_mode == DOUBLE_GRF for k in summary.kernels)
    options = (LARGE_GRF_OPTION,) if large else ()
    kernels = tuple(k.kernel for k in summary.kernels)
    with tempfile.TemporaryDirectory(prefix="xe2tune-ocloc-") as tmp:
        scratch = Path(tmp)
        (scratch / "module.spv").write_bytes(image)
        version = _version(ocloc, scratch, timeout_s)
        cmd = [ocloc, "compile", "-spirv_input", "-file", "module.spv", "-device", target,
               "-out_dir", "out"]
        if options:
            cmd += ["-options", " ".join(options)]
        try:
            proc = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return OclocReport(target, version, options, kernels, (),
                               f"ocloc {version} for {target} took over {timeout_s:g} s")
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else
                     f"exit status {proc.returncode}")
        return OclocReport(target, version, options, kernels, (),
                           f"not compilable by ocloc {version} for {target}: {first}")
    spills = tuple(
        OclocSpill(m["kernel"].removeprefix(SYCL_KERNEL_PREFIX), int(m["simd"]),
                   int(m["regs"]), int(m["spill"])) for m in _SPILL.finditer(output))
    return OclocReport(target, version, options, kernels, spills, None)
