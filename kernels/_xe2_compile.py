"""Compile one SPIR-V module with Intel's Xe2 compiler (``ocloc``) for one GPU, cached on disk.

The module is compiled as the runtime would compile it: with 256 registers per thread
(``-ze-opt-large-register-file``) when one of its kernels asks for them (``grf_size<256>``).
Four verdicts: compiled (a zebin), a compile error (ocloc's first error line), a crash (ocloc
killed by a signal: a bug inside IGC, not in the module's source) and a timeout.

Compiles take seconds to minutes and dry runs and tests repeat them, so outcomes are kept under
the user cache dir, keyed by sha256(SPIR-V) + target + options + compiler version. Only
compiled modules and compile errors are kept: IGC's crashes are not always reproducible (a
module seen to crash in one run compiled in others) and a timeout depends on its limit.
"""

from __future__ import annotations

import enum
import hashlib
import json
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from xe2tune.config import isa_cache_dir
from xe2tune.kernels._cache_files import cache_key, write_atomically
from xe2tune.kernels._spirv import DOUBLE_GRF, SpirvSummary
from xe2tune.kernels._xe2_compiler import Xe2Compiler

LARGE_GRF_OPTION = "-ze-opt-large-register-file"
_CACHE_FORMAT = 1  # bump when what is cached changes


class Verdict(str, enum.Enum):
    """What became of a module."""

    COMPILED = "compiled"
    ERROR = "compile error"
    CRASHED = "crashed"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class CompileOutcome:
    """ocloc's outcome for one module and target: the zebin, or the one-line reason for none."""

    target: str  # the ocloc device, e.g. bmg
    version: str
    options: tuple[str, ...]
    verdict: Verdict
    message: str | None  # one line when not compiled
    log: str
    zebin: bytes | None
    seconds: float
    cached: bool


def module_options(summary: SpirvSummary) -> tuple[str, ...]:
    """The options the runtime would compile this module with."""
    large = any(k.register_mode == DOUBLE_GRF for k in summary.kernels)
    return (LARGE_GRF_OPTION,) if large else ()


def _first_error(output: str, returncode: int) -> str:
    # ocloc ends a failed build with generic lines; the first specific error says why.
    generic = ("backend compiler failed build", "build failed with error code")
    lines = [ln.strip() for ln in output.splitlines()
             if ln.strip() and not any(g in ln.lower() for g in generic)]
    found = next((ln for ln in lines if "error" in ln.lower()),
                 lines[-1] if lines else f"ocloc exit status {returncode}")
    return found if found.lower().startswith("error") else f"error: {found}"


def _run_ocloc(image: bytes, target: str, options: tuple[str, ...], compiler: Xe2Compiler,
               timeout_s: float) -> tuple[Verdict, str | None, str, bytes | None]:
    with tempfile.TemporaryDirectory(prefix="xe2tune-ocloc-") as tmp:
        scratch = Path(tmp)
        (scratch / "module.spv").write_bytes(image)
        cmd = [compiler.ocloc, "compile", "-spirv_input", "-file", "module.spv", "-device",
               target, "-out_dir", "out"]
        if options:
            cmd += ["-options", " ".join(options)]
        try:
            proc = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True,
                                  errors="replace", timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return (Verdict.TIMEOUT, f"timeout: ocloc took over {timeout_s:g} s", "", None)
        log = proc.stdout + proc.stderr
        if proc.returncode < 0:
            name = signal.Signals(-proc.returncode).name
            return Verdict.CRASHED, f"crashed: {name} in IGC", log, None
        binaries = sorted((scratch / "out").glob("*.bin"))
        if proc.returncode != 0 or not binaries:
            return Verdict.ERROR, _first_error(log, proc.returncode), log, None
        return Verdict.COMPILED, None, log, binaries[0].read_bytes()


def _cache_key(image: bytes, target: str, options: tuple[str, ...], version: str) -> str:
    fields = {"spirv": hashlib.sha256(image).hexdigest(), "target": target,
              "options": list(options), "compiler": version, "format": _CACHE_FORMAT}
    return cache_key(fields)


def compile_module(
    image: bytes, summary: SpirvSummary, *, target: str, compiler: Xe2Compiler,
    timeout_s: float,
) -> CompileOutcome:
    """Compile one SPIR-V module for ``target`` (an ocloc device such as bmg or lnl-m).

    A cached outcome is returned when there is one (``cached`` says so); a module ocloc cannot
    compile, crashes on or outlives ``timeout_s`` on gives an outcome saying so, never an
    exception.

    Raises:
        OSError: if the cache dir cannot be written or ocloc cannot be started.
    """
    options = module_options(summary)
    key = _cache_key(image, target, options, compiler.version)
    meta_path = isa_cache_dir() / f"{key}.json"
    zebin_path = meta_path.with_suffix(".zebin")
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        verdict = Verdict(meta["verdict"])
        if verdict is not Verdict.COMPILED or zebin_path.exists():
            zebin = zebin_path.read_bytes() if verdict is Verdict.COMPILED else None
            return CompileOutcome(target, compiler.version, options, verdict, meta["message"],
                                  meta["log"], zebin, meta["seconds"], True)
    started = time.perf_counter()
    verdict, message, log, zebin = _run_ocloc(image, target, options, compiler, timeout_s)
    seconds = time.perf_counter() - started
    if verdict in (Verdict.COMPILED, Verdict.ERROR):
        if zebin is not None:
            write_atomically(zebin_path, zebin)
        meta = {"verdict": verdict.value, "message": message, "log": log, "seconds": seconds}
        write_atomically(meta_path, json.dumps(meta).encode())
    return CompileOutcome(target, compiler.version, options, verdict, message, log, zebin,
                          seconds, False)
