"""The ISA of a config's SPIR-V for a catalog GPU, as the CLI commands ask for and print it.

Shared by ``inspect --isa``, ``bench --isa-target`` and the dry run: the catalog key becomes the
GPU's ocloc device, a missing compiler becomes one line that says how to get it, and the
per-kernel reports become one table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xe2tune.cli._app import console
from xe2tune.cli._table import Column, print_table
from xe2tune.kernels import catalog_device

if TYPE_CHECKING:
    from xe2tune.kernels import KernelIsa, ModuleIsa, SpirvCapture

# The ISA tooling (ocloc's runner, zebin reader, counts) loads when an ISA is asked for: every
# command imports this module at start (its 40 ms were a third of `xe2tune --help`).

ISA_COLUMNS = (
    Column("kernel"), Column("verdict"), Column("SIMD", right=True),
    Column("GRF", right=True), Column("thr/EU", right=True), Column("spill B", right=True),
    Column("priv B", right=True, drop=4), Column("SLM B", right=True, drop=3),
    Column("DPAS", right=True), Column("2D ld", right=True),
    Column("p/v/t", right=True, drop=2), Column("2D st", right=True, drop=5),
    Column("2D pf", right=True, drop=5), Column("ld/st/at", right=True, drop=6),
    Column("SLM", right=True, drop=7), Column("scratch", right=True, drop=1),
    Column("bar", right=True, drop=8), Column("instr", right=True, drop=9),
    Column("loop instr", right=True, drop=10), Column("loop ld/st", right=True, drop=10),
)
ISA_LEGEND = ("2D ld: 2D block loads, p/v/t: plain / VNNI / transposed; 2D st, 2D pf: 2D block "
              "stores, prefetches; ld/st/at: other global loads / stores / atomics; SLM, "
              "scratch: local-memory and spill/fill messages; bar: barriers; loop: the innermost "
              "loop holding every DPAS (the K loop), its instructions and other global loads / "
              "stores; static counts")


def ocloc_device(target: str) -> str:
    """The ocloc device of a catalog GPU (key or alias, e.g. b580 -> bmg, 140v -> lnl-m).

    Raises:
        InvalidConfig: if the catalog has no such GPU.
    """
    return catalog_device(target).ocloc_device


def compiler_missing() -> str | None:
    """Why the Xe2 compiler cannot be used (one line naming how to get it), or None."""
    from xe2tune.kernels import locate_xe2_compiler

    return locate_xe2_compiler().reason


def capture_isa(capture: SpirvCapture, device: str) -> list[ModuleIsa]:
    """Every module of a capture compiled for ``device`` (an ocloc device).

    Raises:
        Xe2CompilerMissing: if the compiler is not installed (check :func:`compiler_missing`).
    """
    from xe2tune.kernels import IsaJob, compile_isa_all

    return compile_isa_all([IsaJob(image, module, device) for image, module
                            in zip(capture.images, capture.modules, strict=True)])


def _row(k: KernelIsa) -> list[str]:
    def num(value: int | None) -> str:
        return "-" if value is None else str(value)

    c = k.counts
    forms = c.block2d_loads_by_form if c else {}
    return [
        k.kernel, k.verdict.value, num(k.simd), num(k.grf_count), num(k.threads_per_eu),
        num(k.spill_bytes), num(k.private_bytes), num(k.slm_bytes),
        num(c.dpas if c else None), num(c.block2d_loads if c else None),
        "/".join(str(forms.get(f, 0)) for f in ("plain", "vnni", "transposed")) if c else "-",
        num(c.block2d_stores if c else None), num(c.block2d_prefetches if c else None),
        f"{c.global_loads}/{c.global_stores}/{c.global_atomics}" if c else "-",
        num(c.slm_messages if c else None), num(c.scratch_messages if c else None),
        num(c.barriers if c else None), num(c.instructions if c else None),
        num(k.dpas_loop.instructions if k.dpas_loop else None),
        f"{k.dpas_loop.global_loads}/{k.dpas_loop.global_stores}" if k.dpas_loop else "-",
    ]


def print_isa(modules: Sequence[ModuleIsa], title: str) -> None:
    """One row per kernel of every module; a failure's reason on the line below its row."""
    from xe2tune.kernels import Verdict

    kernels = [k for m in modules for k in m.kernels]
    details = [k.message if k.verdict is not Verdict.COMPILED or k.counts is None else None
               for k in kernels]
    print_table(console, title, ISA_COLUMNS, [_row(k) for k in kernels], details)
    console.print(ISA_LEGEND, style="dim", highlight=False, markup=False)
    for m in modules:
        console.print(f"  module ({', '.join(k.kernel for k in m.kernels)}): ocloc "
                      f"{m.compiler_version} for {m.target}, "
                      f"{', '.join(m.options) or 'default GRF'}, "
                      f"{'cached' if m.cached else f'{m.compile_seconds:.1f} s'}",
                      highlight=False, markup=False)
