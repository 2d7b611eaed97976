"""Compile SPIR-V modules for GPUs and report their ISA, a few compiles at a time.

At most :data:`MAX_PARALLEL_COMPILES` ocloc processes run at once: one compile of an attention
module holds a core and up to a few GB for seconds to minutes, and the machines this runs on
also build kernels for the tuner.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from xe2tune.kernels._isa import ModuleIsa, module_isa
from xe2tune.kernels._spirv import SpirvSummary
from xe2tune.kernels._xe2_compile import compile_module
from xe2tune.kernels._xe2_compiler import Xe2Compiler, locate_xe2_compiler

MAX_PARALLEL_COMPILES = 2
ISA_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class IsaJob:
    """One module to compile for one GPU (an ocloc device such as bmg, lnl-m)."""

    image: bytes
    summary: SpirvSummary
    target: str


def compile_isa(job: IsaJob, *, timeout_s: float = ISA_TIMEOUT_S,
                compiler: Xe2Compiler | None = None) -> ModuleIsa:
    """Compile one module for its GPU (or take the cached outcome) and report its ISA.

    Raises:
        Xe2CompilerMissing: if no ``compiler`` is given and none is installed.
        OSError: if the cache dir cannot be written or ocloc cannot be started.
    """
    compiler = compiler or locate_xe2_compiler().require()
    outcome = compile_module(job.image, job.summary, target=job.target, compiler=compiler,
                             timeout_s=timeout_s)
    return module_isa(outcome, job.summary, compiler)


def isa_pool() -> ThreadPoolExecutor:
    """A pool to submit :func:`compile_isa` to: :data:`MAX_PARALLEL_COMPILES` at once."""
    return ThreadPoolExecutor(max_workers=MAX_PARALLEL_COMPILES,
                              thread_name_prefix="xe2tune-ocloc")


def compile_isa_all(jobs: Sequence[IsaJob], *, timeout_s: float = ISA_TIMEOUT_S
                    ) -> list[ModuleIsa]:
    """:func:`compile_isa` of every job, in parallel; reports in the jobs' order.

    Raises:
        Xe2CompilerMissing: if the compiler is not installed (before anything is compiled).
        OSError: if the cache dir cannot be written or ocloc cannot be started.
    """
    compiler = locate_xe2_compiler().require()
    with isa_pool() as pool:
        futures = [pool.submit(compile_isa, job, timeout_s=timeout_s, compiler=compiler)
                   for job in jobs]
        return [f.result() for f in futures]
