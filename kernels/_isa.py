"""The ISA report: per kernel, what Intel's compiler made of it for one GPU.

Read from the binary, not from ocloc's log: the zebin's ``.ze_info`` gives the SIMD width,
register count (128 or 256), threads per EU (occupancy), spill, private and local memory sizes
and whether DPAS is used; ``iga64``'s disassembly of each kernel's ISA gives the instruction
counts (:mod:`xe2tune.kernels._isa_counts`). IGC's "spilled around N" of the log is kept as an
extra. Every figure is for the target it was compiled for, never for the device the tuner runs
on.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xe2tune.kernels._isa_counts import IsaCounts, count_dpas_loop, count_isa
from xe2tune.kernels._spirv import SYCL_KERNEL_PREFIX, SpirvSummary
from xe2tune.kernels._xe2_compile import CompileOutcome, Verdict
from xe2tune.kernels._xe2_compiler import Xe2Compiler
from xe2tune.kernels._zebin import ZebinError, ZeKernelInfo, read_zebin

_DISASSEMBLY_TIMEOUT_S = 120.0
# iga64's platform (``-p``) of an ocloc device, by the device name's family prefix.
_IGA_PLATFORMS = (("bmg", "xe2"), ("lnl", "xe2"), ("xe2", "xe2"), ("ptl", "xe3"),
                  ("xe3", "xe3"), ("dg2", "xehpg"), ("acm", "xehpg"), ("pvc", "xehpc"))
_LOG_SPILL = re.compile(r"kernel '?(?P<kernel>[^'\s:]+)'?:?\s+compiled SIMD\d+ allocated \d+ "
                        r"regs and spilled around (?P<spill>\d+)")


@dataclass(frozen=True)
class KernelIsa:
    """One kernel compiled for one GPU; the figures are None when it did not compile."""

    kernel: str  # source name
    target: str  # ocloc device, e.g. bmg, lnl-m
    compiler_version: str
    verdict: Verdict
    message: str | None  # why it did not compile, or why there are no instruction counts
    simd: int | None
    grf_count: int | None
    threads_per_eu: int | None
    spill_bytes: int | None
    private_bytes: int | None
    slm_bytes: int | None
    has_dpas: bool | None
    counts: IsaCounts | None
    log_spill_estimate: int | None  # IGC's "spilled around N" in ocloc's log
    # The innermost loop holding every dpas (an attention kernel's K loop), None without one.
    dpas_loop: IsaCounts | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, the instruction counts flattened in."""
        fields = {k: v for k, v in vars(self).items() if k not in ("counts", "dpas_loop")}
        return {**fields, "verdict": self.verdict.value,
                **(self.counts.to_dict() if self.counts else {"instructions": None}),
                "dpas_loop": self.dpas_loop.to_dict() if self.dpas_loop else None}

    def text(self) -> str:
        """One line for people (without the kernel name and target)."""
        if self.verdict is not Verdict.COMPILED:
            return self.message or self.verdict.value
        spill = f"SPILLS {self.spill_bytes} B" if self.spill_bytes else "no spill"
        head = (f"SIMD{self.simd}, {self.grf_count} GRF, {self.threads_per_eu} threads/EU, "
                f"{spill}, private {self.private_bytes} B, SLM {self.slm_bytes} B")
        c = self.counts
        if c is None:
            return f"{head} ({self.message})"
        forms = ", ".join(f"{n} {k}" for k, n in c.block2d_loads_by_form.items())
        return (f"{head}, {c.dpas} DPAS, 2D loads {c.block2d_loads}"
                f"{f' ({forms})' if forms else ''}, 2D stores {c.block2d_stores}, 2D prefetches "
                f"{c.block2d_prefetches}, global ld/st/atomic {c.global_loads}/"
                f"{c.global_stores}/{c.global_atomics}, SLM msgs {c.slm_messages}, scratch msgs "
                f"{c.scratch_messages}, barriers {c.barriers}, {c.instructions} instructions"
                f"{self._loop_text()}")

    def _loop_text(self) -> str:
        lp = self.dpas_loop
        if lp is None:
            return ""
        return (f"; DPAS loop: {lp.instructions} instructions, {lp.dpas} DPAS, 2D loads "
                f"{lp.block2d_loads}, 2D prefetches {lp.block2d_prefetches}, global ld/st "
                f"{lp.global_loads}/{lp.global_stores}, SLM msgs {lp.slm_messages}, scratch msgs "
                f"{lp.scratch_messages}")


@dataclass(frozen=True)
class ModuleIsa:
    """One SPIR-V module compiled for one GPU: the verdict and every kernel's report."""

    target: str
    compiler_version: str
    options: tuple[str, ...]
    verdict: Verdict
    message: str | None
    kernels: tuple[KernelIsa, ...]
    compile_seconds: float
    cached: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"target": self.target, "compiler_version": self.compiler_version,
                "options": list(self.options), "verdict": self.verdict.value,
                "message": self.message, "compile_s": round(self.compile_seconds, 3),
                "cached": self.cached, "kernels": [k.to_dict() for k in self.kernels]}

    def text(self) -> str:
        """Lines for people: the module's verdict, then one line per kernel."""
        where = (f"ocloc {self.compiler_version} for {self.target} "
                 f"({', '.join(self.options) or 'default GRF'})")
        lines = [f"{where}: {self.message or self.verdict.value}"]
        lines += [f"  {k.kernel}: {k.text()}" for k in self.kernels]
        return "\n".join(lines)


def iga_platform(target: str) -> str | None:
    """iga64's platform name for an ocloc device, if known."""
    return next((p for prefix, p in _IGA_PLATFORMS if target.startswith(prefix)), None)


def _disassemble(compiler: Xe2Compiler, target: str, isa: bytes) -> tuple[str | None, str | None]:
    """The listing, or None and why not."""
    platform = iga_platform(target)
    if compiler.iga64 is None:
        return None, "no iga64 beside ocloc or on PATH: no instruction counts"
    if platform is None:
        return None, f"no iga64 platform known for {target}: no instruction counts"
    with tempfile.TemporaryDirectory(prefix="xe2tune-iga-") as tmp:
        path = Path(tmp) / "kernel.krn"
        path.write_bytes(isa)
        try:
            proc = subprocess.run([compiler.iga64, "-d", "-p", platform, str(path)],
                                  capture_output=True, text=True, errors="replace",
                                  timeout=_DISASSEMBLY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"iga64 took over {_DISASSEMBLY_TIMEOUT_S:g} s: no instruction counts"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return None, f"iga64 failed: {last}"
    return proc.stdout, None


def _failed(kernel: str, outcome: CompileOutcome, verdict: Verdict, message: str) -> KernelIsa:
    return KernelIsa(kernel, outcome.target, outcome.version, verdict, message, None, None,
                     None, None, None, None, None, None, None)


def _kernel(info: ZeKernelInfo, isa: bytes | None, outcome: CompileOutcome,
            compiler: Xe2Compiler, log_spills: dict[str, int]) -> KernelIsa:
    listing, note = (_disassemble(compiler, outcome.target, isa) if isa is not None
                     else (None, "no .text section for this kernel: no instruction counts"))
    return KernelIsa(
        kernel=info.name.removeprefix(SYCL_KERNEL_PREFIX), target=outcome.target,
        compiler_version=outcome.version, verdict=Verdict.COMPILED, message=note,
        simd=info.simd_size, grf_count=info.grf_count, threads_per_eu=info.eu_thread_count,
        spill_bytes=info.spill_size, private_bytes=info.private_size, slm_bytes=info.slm_size,
        has_dpas=info.has_dpas, counts=count_isa(listing) if listing is not None else None,
        log_spill_estimate=log_spills.get(info.name),
        dpas_loop=count_dpas_loop(listing) if listing is not None else None,
    )


def module_isa(outcome: CompileOutcome, summary: SpirvSummary,
               compiler: Xe2Compiler) -> ModuleIsa:
    """The report of one compiled (or failed) module; kernels follow the SPIR-V's order."""
    names = [k.kernel for k in summary.kernels]
    verdict, message = outcome.verdict, outcome.message
    kernels: tuple[KernelIsa, ...] = ()
    if outcome.zebin is not None:
        try:
            zebin = read_zebin(outcome.zebin)
        except ZebinError as exc:
            verdict, message = Verdict.ERROR, f"error: unreadable zebin: {exc}"
        else:
            log_spills = {m["kernel"]: int(m["spill"])
                          for m in _LOG_SPILL.finditer(outcome.log)}
            order = {n: i for i, n in enumerate(names)}
            # Only the module's own kernels: IGC adds a kernel of its own
            # (Intel_Symbol_Table_Void_Program) to a module that calls functions.
            infos = sorted((i for i in zebin.kernels.values()
                            if i.name.removeprefix(SYCL_KERNEL_PREFIX) in order),
                           key=lambda i: order[i.name.removeprefix(SYCL_KERNEL_PREFIX)])
            found = {i.name.removeprefix(SYCL_KERNEL_PREFIX) for i in infos}
            kernels = tuple(_kernel(i, zebin.isa.get(i.name), outcome, compiler, log_spills)
                            for i in infos) + tuple(
                _failed(n, outcome, Verdict.ERROR, "error: not in ocloc's binary")
                for n in names if n not in found)
    if verdict is not Verdict.COMPILED:
        kernels = tuple(_failed(n, outcome, verdict, message or verdict.value) for n in names)
    return ModuleIsa(outcome.target, outcome.version, outcome.options, verdict, message,
                     kernels, outcome.seconds, outcome.cached)
