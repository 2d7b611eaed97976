"""Build the SYCL runtime-compiler extension on first use, into the user cache dir.

Building at pip-install time would compile against the temporary copies of dpctl and
intel-sycl-rt in PEP 517's isolated build env. Building here, against the installed
environment's headers and libsycl, with no rpath, keeps the module tied to the libraries dpctl
itself loads (dpctl is imported first, so the loader reuses its libsycl by soname).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType

from xe2tune.config import cache_dir
from xe2tune.errors import Xe2TuneError

_SOURCE = Path(__file__).parent / "_native" / "sycl_jit.cpp"
_MODULE = "_sycl_jit"


class NativeBuildError(Xe2TuneError):
    """The extension could not be compiled or loaded (no g++, missing headers, ...)."""


def _dist_file(dist: str, suffix: str) -> Path:
    files = importlib.metadata.files(dist) or []
    name = suffix.rsplit("/", 1)[-1]
    # Only files of that name are resolved: resolving each of intel-sycl-rt's 2,450 files cost
    # every process that loads the extension about 0.4 s.
    for f in files:
        if f.name == name:
            path = Path(f.locate()).resolve()
            if path.as_posix().endswith(suffix):
                return path
    raise NativeBuildError(f"{dist} is installed without {suffix}; reinstall it with pip")


def _toolchain() -> dict[str, str]:
    # dpctl (and with it libsycl) loads here, on the first build: the extension links the
    # libsycl dpctl loaded, and nothing that only reads configs or results pays for it.
    import dpctl  # noqa: F401

    sycl_hpp = _dist_file("intel-sycl-rt", "include/sycl/sycl.hpp")
    libsycl = _dist_file("intel-sycl-rt", "lib/libsycl.so")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise NativeBuildError("no C++ compiler found (install g++, or set CXX)")
    return {
        "cxx": cxx,
        "python_include": sysconfig.get_paths()["include"],
        "sycl_include": str(sycl_hpp.parent.parent),
        "libsycl_dir": str(libsycl.parent),
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or ".so",
    }


def _build_key(tools: dict[str, str]) -> str:
    h = hashlib.sha256(_SOURCE.read_bytes())
    for dist in ("dpctl", "intel-sycl-rt"):
        h.update(f"{dist}={importlib.metadata.version(dist)};".encode())
    h.update(repr(sorted(tools.items())).encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def _compile(tools: dict[str, str], target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        cmd = [
            tools["cxx"], "-O2", "-shared", "-fPIC", "-std=c++17", "-fvisibility=hidden",
            "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING",
            "-I", tools["python_include"], "-I", tools["sycl_include"],
            str(_SOURCE), "-o", str(out),
            "-L", tools["libsycl_dir"], "-lsycl",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NativeBuildError(
                "building the SYCL runtime-compiler extension failed: "
                + (proc.stderr.strip().splitlines() or ["no output"])[-1]
                + f"\ncommand: {' '.join(cmd)}\n{proc.stderr}"
            )
        # Atomic publish: a process that finds the file without taking the lock never sees half.
        os.replace(out, target)


@cache
def load_extension() -> ModuleType:
    """The compiled ``_sycl_jit`` module, building it first if this environment has none.

    Raises:
        NativeBuildError: if the compiler or the SYCL headers are missing or the build fails.
    """
    tools = _toolchain()
    target = cache_dir() / "native" / _build_key(tools) / f"{_MODULE}{tools['ext_suffix']}"
    if not target.exists():
        # One compile for concurrent first uses (the test suite's workers start together, a
        # search beside a worker): the others wait for it instead of compiling it again.
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                _compile(tools, target)
    spec = importlib.util.spec_from_file_location(_MODULE, target)
    if spec is None or spec.loader is None:
        raise NativeBuildError(f"cannot load {target}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise NativeBuildError(f"cannot load {target}: {exc}") from exc
    return module
