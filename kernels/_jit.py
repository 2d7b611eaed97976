"""Compile SYCL C++ kernel sources at run time; the one place build options are generated.

Everything behind :func:`build_program` is the native ``_sycl_jit`` extension; when dpctl gains
its own SYCL-source compiler (unreleased main has one) only this module changes.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xe2tune.config import cache_dir
from xe2tune.errors import KernelCompileError
from xe2tune.kernels import _device_binaries
from xe2tune.kernels._native_build import load_extension

if TYPE_CHECKING:
    import dpctl

KERNEL_DIR = Path(__file__).parent
DEFINE_PREFIX = "XE2T_"
_IDENT = re.compile(r"^[A-Z][A-Z0-9_]*$")


def define_flags(defines: Mapping[str, int | str | bool]) -> list[str]:
    """``-DXE2T_<NAME>=<value>`` flags, sorted; the only place config values become macros.

    Every macro carries the ``XE2T_`` prefix because a bare name that also appears in the SYCL
    headers (``X``, ``N``...) silently breaks their compilation.

    Raises:
        ValueError: if a name is not an upper-case identifier or a value is not a plain token.
    """
    flags = []
    for name in sorted(defines):
        if not _IDENT.match(name):
            raise ValueError(f"define name {name!r} must be an upper-case identifier")
        value = defines[name]
        text = str(int(value)) if isinstance(value, bool) else str(value)
        if not re.match(r"^[A-Za-z0-9_.+-]+$", text):
            raise ValueError(f"define {name}={text!r} is not a plain token")
        flags.append(f"-D{DEFINE_PREFIX}{name}={text}")
    return flags


def _compiled_text(file_name: str, text: str, flags: Sequence[str],
                   preamble: Sequence[str]) -> str:
    """The text the run-time compiler gets: a preamble of the SYCL headers alone
    (:func:`_sycl_preamble`), the config's macros (``flags`` as ``#define`` lines) and the
    kernel source under its own name.

    The compiler precompiles a source's preamble (its leading preprocessor directives) once and
    keeps it under the user cache (``--persistent-auto-pch``), so a build skips parsing the SYCL
    headers (measured on the CPU device: a decode build 2.6 -> 1.9 s). A preamble is reused only
    when its text and the options are the same, so the macros are neither ``-D`` flags nor
    directives of the preamble, which a declaration ends. That declaration spells the macros
    out: the runtime's persistent cache keys a build by its preprocessed text and options, and
    a macro tested only by ``#if`` (a config an ``#error`` rejects) would leave no trace there,
    so the failing build would be answered with another config's kernels.
    """
    return "".join(line + "\n" for line in _lines_ahead(file_name, flags, preamble)) + text


def _lines_ahead(file_name: str, flags: Sequence[str], preamble: Sequence[str]) -> list[str]:
    """The lines :func:`_compiled_text` puts ahead of the kernel source's first."""
    return [*preamble,
            f'[[maybe_unused]] static constexpr char xe2t_build_macros[] = "{" ".join(flags)}";',
            *(f"#define {flag[2:].replace('=', ' ', 1)}" for flag in flags),
            f'#line 1 "{file_name}"']


SYCL_HEADERS = "sycl_device.hpp"
_SYSTEM_INCLUDE = re.compile(r"^#include <[^>]+>$", re.MULTILINE)


def _sycl_preamble(read: Callable[[str], str | None]) -> list[str]:
    """The preamble's lines: the ``#include <...>`` lines of ``kernels/sycl_device.hpp``, which
    every kernel source includes (their text, not the header's name, keys the precompiled
    preamble, so an edit of the list is a new preamble), or ``<sycl/sycl.hpp>`` for sources
    from before that header (another revision's, a test's own)."""
    text = read(SYCL_HEADERS)
    if text is None:
        return ["#include <sycl/sycl.hpp>"]
    return _SYSTEM_INCLUDE.findall(text)


_RTC_LOCATION = re.compile(r"\brtc_\d+\.cpp:(\d+):")


def _located_log(log: str, file_name: str, flags: Sequence[str],
                 preamble: Sequence[str]) -> str:
    """The compiler log with the compiled text's locations (``rtc_<n>.cpp:<line>:``, counted
    from the preamble) as the kernel source's own (``<file_name>:<line>:``)."""
    before = len(_lines_ahead(file_name, flags, preamble))

    def located(match: re.Match[str]) -> str:
        line = int(match.group(1)) - before
        return f"{file_name}:{line}:" if line > 0 else match.group(0)

    return _RTC_LOCATION.sub(located, log)


# The options that shape a build's output; the preamble cache's place does not.
_OUTPUT_OPTIONS = ("-O3",)


def _compile_options() -> tuple[str, ...]:
    return (*_OUTPUT_OPTIONS, f"--persistent-auto-pch={cache_dir() / 'sycl-preambles'}")


def kernel_source(file_name: str) -> str:
    """The text of a kernel source under ``kernels/``."""
    return (KERNEL_DIR / file_name).read_text()


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def _headers(file_name: str, read: Callable[[str], str | None] = None) -> list[tuple[str, str]]:
    """The headers under ``kernels/`` a source includes, directly or not, sorted by name.

    Only these reach the build and the hash, so a new family's headers never change the hash
    (and the study names) of the families that do not include them. ``read`` gives a file's
    text, None when there is no such file (default: the files under ``kernels/``).
    """
    read = read or _read_kernel_file
    found: dict[str, str] = {}
    pending = [read(file_name) or ""]
    while pending:
        for name in _INCLUDE.findall(pending.pop()):
            text = read(name)
            if name not in found and text is not None:
                found[name] = text
                pending.append(text)
    return sorted(found.items())


def _read_kernel_file(name: str) -> str | None:
    path = KERNEL_DIR / name
    return path.read_text() if path.is_file() else None


def source_hash(file_name: str, sources: Mapping[str, str] | None = None) -> str:
    """sha256 over a kernel source and every header it includes (16 hex digits); ``sources``
    as for :func:`build_program`."""
    read = sources.get if sources is not None else _read_kernel_file
    h = hashlib.sha256((read(file_name) or "").encode())
    for name, text in _headers(file_name, read):
        h.update(name.encode())
        h.update(text.encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class BuiltProgram:
    """Kernels of one build, by name, and what the build cost."""

    kernels: Mapping[str, Any]  # name -> dpctl.program.SyclKernel
    build_seconds: float
    cached: bool  # True when served from this process's map (no runtime call at all)
    log: str
    # Bytes each kernel spills, as the device's compiler allocated them (the SYCL kernel info
    # spill_memory_size: Intel GPUs under Level Zero); empty where the device cannot tell.
    spill_bytes: Mapping[str, int] = field(default_factory=dict)
    loaded: bool = False  # True when loaded from a device binary kept on disk (no compile)

    def spill_reason(self) -> str | None:
        """Why the build is not worth timing (its kernels spill registers), or None."""
        spilled = {name: n for name, n in self.spill_bytes.items() if n > 0}
        if not spilled:
            return None
        return "spills registers (the device compiler's allocation, not timed): " + ", ".join(
            f"{name} {n} B" for name, n in sorted(spilled.items()))


_cache: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], BuiltProgram] = {}
_cache_lock = threading.Lock()


def build_identity(file_name: str, defines: Mapping[str, int | str | bool],
                   sources: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What a build's output is a function of, besides the device and runtime: the sources'
    hash, the macros and the options (the preamble cache's path aside), as JSON values."""
    return {"source": file_name, "source_hash": source_hash(file_name, sources),
            "defines": define_flags(defines), "options": list(_OUTPUT_OPTIONS)}


def _device_key(queue: dpctl.SyclQueue) -> str:
    d = queue.sycl_device
    return f"{d.backend}:{d.device_type}:{d.name}:{d.driver_version}"


def build_program(
    queue: dpctl.SyclQueue,
    file_name: str,
    kernel_names: Sequence[str],
    defines: Mapping[str, int | str | bool],
    *,
    sources: Mapping[str, str] | None = None,
) -> BuiltProgram:
    """Compile ``kernels/<file_name>`` with ``defines`` for the queue's device.

    ``sources`` (file name -> text) replaces the files under ``kernels/`` for this build, e.g.
    the kernels of another revision (tests/kernels/test_kv_variant_isolation.py compares their
    code).

    Thread-safe; the compile itself releases the GIL. Results are cached in-process by
    (device, source hash, options, kernel names); across processes a repeat build loads the
    device binary the first one kept (kernels/_device_binaries.py; OpenCL devices), else the
    SYCL runtime's persistent cache (``SYCL_CACHE_DIR``) makes it cheaper.

    Raises:
        KernelCompileError: with the compiler log and the path of the source that failed.
    """
    flags = tuple(define_flags(defines))
    read = sources.get if sources is not None else _read_kernel_file
    key = (_device_key(queue), source_hash(file_name, sources), flags, tuple(kernel_names))
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return BuiltProgram(hit.kernels, 0.0, True, hit.log, hit.spill_bytes)
    preamble = _sycl_preamble(read)
    text = _compiled_text(file_name, read(file_name) or "", flags, preamble)
    headers = _headers(file_name, read)
    kept_at = (_device_binaries.binary_path(key[0], text, headers, kernel_names, _OUTPUT_OPTIONS)
               if kernel_names and _device_binaries.binaries_kept() else None)
    started = time.perf_counter()
    kept = _device_binaries.load_kernels(queue, kept_at, kernel_names) if kept_at else None
    if kept is not None:
        kernels, entry = kept
        built = BuiltProgram(kernels, time.perf_counter() - started, False, entry.log,
                             entry.spill_bytes, loaded=True)
    else:
        built = _compile(queue, file_name, kernel_names, flags, preamble, text, headers)
        if kept_at is not None:
            _device_binaries.keep_build(queue, kept_at, built.kernels, built.log,
                                        built.spill_bytes)
    with _cache_lock:
        _cache[key] = built
    return built


def _compile(queue: dpctl.SyclQueue, file_name: str, kernel_names: Sequence[str],
             flags: Sequence[str], preamble: Sequence[str], text: str,
             headers: Sequence[tuple[str, str]]) -> BuiltProgram:
    ext = load_extension()
    started = time.perf_counter()
    try:
        kernels, log, spills = ext.build_sycl_source(
            queue, text, list(headers), list(kernel_names), list(_compile_options()))
    except ext.BuildError as exc:
        message, log = exc.args
        log = _located_log(log, file_name, flags, preamble)
        raise KernelCompileError(
            f"building {file_name} with {' '.join(flags)} failed: {message.splitlines()[0]}",
            log=log,
            source_path=str(KERNEL_DIR / file_name),
        ) from None
    return BuiltProgram(kernels, time.perf_counter() - started, False, log,
                        {name: int(n) for name, n in spills.items()})


def can_build_sycl(queue: dpctl.SyclQueue) -> bool:
    """Whether the queue's device can compile SYCL source at run time."""
    return bool(load_extension().can_build_sycl(queue))


def has_matrix_aspect(queue: dpctl.SyclQueue) -> bool:
    """Whether joint_matrix reaches a matrix engine on the queue's device (ext_intel_matrix)."""
    return bool(load_extension().has_matrix_aspect(queue))


def submit_at_addresses(
    queue: dpctl.SyclQueue,
    kernel: Any,
    args: Sequence[tuple[str, int | float]],
    global_size: Sequence[int],
    local_size: Sequence[int],
) -> dpctl.SyclEvent:
    """Submit ``kernel`` (a dpctl.program.SyclKernel) with pointer arguments given as addresses.

    ``args`` are (kind, value) pairs: ``("ptr", address)``, ``("int", n)`` or ``("float", x)``.
    An address may be any memory the device can access: a USM allocation of the queue's
    context, or on a device with ``usm_system_allocations`` plain host memory, which
    ``dpctl.memory`` refuses to wrap. Returns the launch's event (not waited for).
    """
    kinds, values = zip(*args, strict=True) if args else ((), ())
    return load_extension().submit_at_addresses(
        queue, kernel, list(kinds), list(values), list(global_size), list(local_size))
