"""Capture the SPIR-V of a launch plan's build from the SYCL runtime, in a scratch child process.

``SYCL_DUMP_IMAGES=1`` makes the runtime write every device image it hands to the driver into
its working directory as ``sycl_spir64_<n>.spv``; like ``CL_CONFIG_CPU_VECTORIZER_MODE`` it is
read once, when the runtime loads, hence a child process with its own environment and a fresh
directory. The child builds on the embedded ``opencl:cpu`` device: the SPIR-V is what the
front end made of the source and defines, whatever device it is then built for, so a catalog
GPU's plan needs no GPU (its description only changes the defines).

A capture is a function of the sources, the defines, the build options and the runtime, and a
child costs about a second even when the runtime's own cache has the build (starting Python
and the device), so captures are kept under the user cache dir, keyed by those. Only captures
returned are kept: a child that died (an AMX Xeon's CPU back end on joint_matrix) is the
machine's verdict, not the build's, and a timeout depends on its limit. A module the runtime
serves from its own persistent cache dumps with other value names than a fresh build of the same
source, so a caller comparing modules asks for ``fresh_build``: its child builds with that cache
off, and its capture is kept apart from the others (a function of the same inputs, so kept too:
a comparison repeated on unchanged sources builds nothing). With the runtime's cache off for
this process (``SYCL_CACHE_PERSISTENT=0``) this one is off too: whoever turns that cache off
wants every build done anew.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xe2tune.config import (
    cpu_vectorizer_mode,
    spirv_cache_dir,
    spirv_capture_env,
    sycl_persistent_cache_on,
)
from xe2tune.errors import DeviceProcessError, KernelCompileError, Xe2TuneError
from xe2tune.kernels._cache_files import cache_key, runtime_versions, write_atomically
from xe2tune.kernels._family import LaunchPlan
from xe2tune.kernels._jit import build_identity, build_program
from xe2tune.kernels._spirv import KernelSpirv, SpirvSummary, parse_spirv

CAPTURE_DEVICE = "opencl:cpu"
_RESULT_FILE = "capture.json"
# dpctl's own fill kernels are dumped as sycl_spir64.spv (no number): not the plan's build.
_DUMP = re.compile(r"^sycl_spir64_(\d+)\.spv$")
_CACHE_FORMAT = 1  # bump when what is cached changes
_CHILD = ("import sys; from xe2tune.kernels._spirv_capture import child_main; "
          "sys.exit(child_main())")


class CaptureTimeout(Xe2TuneError):
    """The capture child outlived its time limit and was killed."""


@dataclass(frozen=True)
class SpirvCapture:
    """The SPIR-V modules of one build, with the build's log and times.

    ``build_seconds`` is the runtime compile inside the child; ``capture_seconds`` the whole
    capture (child start, imports, device, build, parsing).
    """

    modules: tuple[SpirvSummary, ...]
    images: tuple[bytes, ...]  # the dumped modules in dump order; modules[i] reads images[i]
    log: str
    build_seconds: float
    capture_seconds: float
    cached: bool = False  # from the capture cache (build_seconds: the capture's that was kept)

    @property
    def kernels(self) -> tuple[KernelSpirv, ...]:
        """Every entry point of every module, including kernels the CPU device did not keep
        (a joint_matrix kernel is dumped, then left out of the bundle of a device without a
        matrix engine)."""
        return tuple(k for m in self.modules for k in m.kernels)

    def summary_dict(self) -> dict[str, Any]:
        """The build's SPIR-V facts as JSON: per kernel, and over the build.

        ``local_memory_bytes`` over the build is the largest kernel's (each launch has its own).
        """
        kernels = self.kernels
        return {
            "kernels": [k.to_dict() for k in kernels],
            "matrix_mads": sum(m.matrix_mads for m in self.modules),
            "subgroup_sizes": sorted({k.subgroup_size for k in kernels if k.subgroup_size}),
            "register_modes": sorted({k.register_mode for k in kernels}),
            "local_memory_bytes": max((k.local_memory_bytes for k in kernels), default=0),
            "extensions": sorted({e for m in self.modules for e in m.extensions}),
            "capabilities": sorted({c for m in self.modules for c in m.capabilities}),
            "modules": len(self.modules),
        }

    def to_dict(self) -> dict[str, Any]:
        """:meth:`summary_dict` with the build's log and times."""
        return {**self.summary_dict(), "build_s": round(self.build_seconds, 3),
                "capture_s": round(self.capture_seconds, 3), "cached": self.cached,
                "log": self.log}


def _run_child(
    plan: LaunchPlan, vectorizer_mode: str, timeout_s: float, sources: Mapping[str, str] | None,
    fresh_build: bool,
) -> tuple[dict[str, Any], tuple[bytes, ...]]:
    """The child's outcome (``capture.json``) and the modules it dumped, scratch deleted.

    Raises:
        subprocess.TimeoutExpired: past ``timeout_s`` (the child is killed first).
        DeviceProcessError: if the child dies before any SPIR-V was dumped (after, the death
            is its outcome: ``"died"``).
    """
    request = json.dumps({"source_file": plan.source_file, "defines": dict(plan.defines),
                          "sources": dict(sources) if sources is not None else None})
    env = spirv_capture_env(vectorizer_mode)
    if fresh_build:
        env["SYCL_CACHE_PERSISTENT"] = "0"
    with tempfile.TemporaryDirectory(prefix="xe2tune-spirv-") as scratch:
        proc = subprocess.run(  # on timeout, run() kills the child and raises TimeoutExpired
            [sys.executable, "-c", _CHILD], input=request, capture_output=True, text=True,
            cwd=scratch, env=env, timeout=max(timeout_s, 0.0),
        )
        result_path = Path(scratch) / _RESULT_FILE
        dumps = sorted((int(m[1]), p) for p in Path(scratch).iterdir()
                       if (m := _DUMP.match(p.name)))
        images = tuple(p.read_bytes() for _, p in dumps)
        if proc.returncode == 0 and result_path.exists():
            return json.loads(result_path.read_text()), images
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        died = f"the SPIR-V capture child exited with {proc.returncode}: {last}"
        if not images:
            raise DeviceProcessError(died, proc.stderr)
        # The CPU back end may crash on what it does compile (the OpenCL CPU runtime of an AMX
        # Xeon compiles joint_matrix kernels, and segfaults on the construct IGC does) after
        # the SPIR-V was dumped: the death is the build's outcome, judged as a failed build.
        return {"ok": False, "died": True, "message": died, "log": f"{died}\n{proc.stderr}",
                "source_path": plan.source_file}, images


def _cache_path(plan: LaunchPlan, sources: Mapping[str, str] | None, fresh_build: bool) -> Path:
    fields = {"build": build_identity(plan.source_file, plan.defines, sources),
              "vectorizer_mode": cpu_vectorizer_mode(), "needs_intel_gpu": plan.needs_intel_gpu,
              "runtime": runtime_versions(), "fresh_build": fresh_build,
              "format": _CACHE_FORMAT}
    return spirv_cache_dir() / f"{cache_key(fields)}.json"


def _cached(path: Path) -> tuple[str, float, tuple[bytes, ...]] | None:
    """The log, build seconds and images kept at ``path``, if any (unreadable: none)."""
    try:
        kept = json.loads(path.read_text())
        return (kept["log"], kept["build_s"],
                tuple(base64.b64decode(image) for image in kept["images"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _keep(path: Path, capture: SpirvCapture) -> None:
    kept = {"log": capture.log, "build_s": capture.build_seconds,
            "images": [base64.b64encode(image).decode() for image in capture.images]}
    write_atomically(path, json.dumps(kept).encode())


def capture_spirv(
    plan: LaunchPlan, *, timeout_s: float, sources: Mapping[str, str] | None = None,
    fresh_build: bool = False,
) -> SpirvCapture:
    """Build ``plan``'s source with its defines in a child process and summarize the SPIR-V.

    ``sources`` (file name -> text) builds other kernel sources than the files under
    ``kernels/`` (another revision's), as :func:`xe2tune.kernels.build_program` takes them.
    ``fresh_build`` compiles without the runtime's persistent cache (module docstring): for
    SPIR-V compared byte for byte with another capture's.

    The build is the real one (:func:`xe2tune.kernels.build_program`, same options) with an
    empty kernel-name list, so kernels the CPU device leaves out of the bundle do not fail it.
    A plan that ``needs_intel_gpu`` is captured once its SPIR-V is dumped, whatever the CPU
    back end then says of it. A capture kept by the capture cache (module docstring) returns
    without a child (``cached``). A child runs first as this process would run it (same
    vectorizer mode and persistent cache: a vector-lane family's capture costs what its real
    build costs, often a cache hit); when that fails and the SPIR-V requires a subgroup size,
    which the CPU runtime builds only under vectorizer mode 0 (about 10x slower), once more
    under mode 0, whose verdict stands.
    Scratch directories are deleted before this returns.

    Raises:
        KernelCompileError: if the build fails (with the compiler log).
        CaptureTimeout: if the capture takes longer than ``timeout_s`` (the child is killed).
        DeviceProcessError: if a child dies without a result (no device, a crash in the runtime).
        SpirvError: if a dumped module cannot be read.
        OSError: if the cache dir cannot be written.
    """
    started = time.perf_counter()
    cache_path = _cache_path(plan, sources, fresh_build) if sycl_persistent_cache_on() else None
    kept = _cached(cache_path) if cache_path is not None else None
    if kept is not None:
        log, build_seconds, images = kept
        return SpirvCapture(tuple(parse_spirv(image) for image in images), images, log,
                            build_seconds, time.perf_counter() - started, cached=True)
    for mode in dict.fromkeys((cpu_vectorizer_mode(), "0")):
        try:
            result, images = _run_child(plan, mode, started + timeout_s - time.perf_counter(),
                                        sources, fresh_build)
        except subprocess.TimeoutExpired:
            raise CaptureTimeout(f"capturing the SPIR-V of {plan.source_file} took over "
                                 f"{timeout_s:g} s; the build was killed") from None
        modules = tuple(parse_spirv(image) for image in images)
        if (result["ok"] or result.get("died") or (plan.needs_intel_gpu and images)
                or not any(k.subgroup_size for m in modules for k in m.kernels)):
            break
    # A plan for an Intel GPU's built-ins fails (or crashes) in the CPU back end after its
    # SPIR-V was dumped: that SPIR-V is the capture, and the CPU's verdict stays in the log.
    if not result["ok"] and not (plan.needs_intel_gpu and images):
        if result.get("died"):
            raise DeviceProcessError(result["message"], result["log"])
        raise KernelCompileError(result["message"], log=result["log"],
                                 source_path=result["source_path"])
    capture = SpirvCapture(modules, images, result["log"], result.get("build_s", 0.0),
                           time.perf_counter() - started)
    if cache_path is not None and not result.get("died"):
        _keep(cache_path, capture)
    return capture


def child_main() -> int:
    """The child: build the requested source on :data:`CAPTURE_DEVICE` in the working directory.

    Reads ``{"source_file", "defines", "sources"}`` as JSON from stdin and writes the outcome to
    ``capture.json``: the runtime and driver may print to stdout themselves.

    Raises:
        dpctl.SyclQueueCreationError: if there is no such device (the parent reports it).
    """
    import dpctl  # the child process is the only one here that opens a device

    request = json.loads(sys.stdin.read())
    queue = dpctl.SyclQueue(CAPTURE_DEVICE)
    try:
        built = build_program(queue, request["source_file"], (), request["defines"],
                              sources=request.get("sources"))
        result = {"ok": True, "log": built.log, "build_s": built.build_seconds}
    except KernelCompileError as exc:
        result = {"ok": False, "message": exc.args[0], "log": exc.log,
                  "source_path": exc.source_path}
    Path(_RESULT_FILE).write_text(json.dumps(result))
    return 0
