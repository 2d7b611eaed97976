"""Where Intel's Xe2 GPU compiler (``ocloc`` with IGC, and ``iga64``) is on this machine.

Looked for in this order: ``XE2TUNE_OCLOC`` (a path to an ``ocloc``), the folder
``scripts/install-xe2-compiler`` installs into (same default rule as the script), then an
``ocloc`` on PATH, but only one that knows the Xe2 targets: Debian bookworm's ``ocloc`` (22.43)
does not, and its verdicts say nothing about Xe2. On a host with an Intel GPU driver the driver's
``ocloc`` is the same compiler. ``iga64`` (the ISA disassembler) is taken from beside the chosen
``ocloc``, else from PATH.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from xe2tune.config import ocloc_override, xe2_compiler_dir
from xe2tune.errors import Xe2TuneError

INSTALL_SCRIPT = "scripts/install-xe2-compiler"
XE2_DEVICE = "bmg"  # an ocloc that lists this device compiles for Xe2
_QUERY_TIMEOUT_S = 60.0
_HOW_TO_GET = (f"run {INSTALL_SCRIPT} or set XE2TUNE_OCLOC to the ocloc of an Intel GPU driver "
               "that knows Xe2")


class Xe2CompilerMissing(Xe2TuneError):
    """No Xe2-capable ``ocloc`` was found; the message is one line and says how to get one."""


@dataclass(frozen=True)
class Xe2Compiler:
    """The ``ocloc`` chosen, the ``iga64`` beside it (if any), its version and how it was found."""

    ocloc: str
    iga64: str | None
    version: str  # ocloc's version and IGC's revision: part of every cache key
    found_by: str  # "XE2TUNE_OCLOC", "install dir <path>" or "PATH"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return dict(vars(self))


@dataclass(frozen=True)
class CompilerLookup:
    """The compiler found, or the one-line reason there is none."""

    compiler: Xe2Compiler | None
    reason: str | None

    def require(self) -> Xe2Compiler:
        """The compiler.

        Raises:
            Xe2CompilerMissing: if none was found (with :attr:`reason`).
        """
        if self.compiler is None:
            raise Xe2CompilerMissing(self.reason or "no Xe2 compiler")
        return self.compiler


def _knows_xe2(ocloc: str) -> bool:
    try:
        proc = subprocess.run([ocloc, "compile", "--help"], capture_output=True, text=True,
                              timeout=_QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    # The help text lists every device name, comma-separated.
    return f" {XE2_DEVICE}," in proc.stdout + proc.stderr


def _query(ocloc: str, what: str) -> str | None:
    # `ocloc query X` writes X's value into a file named X in its working directory.
    with tempfile.TemporaryDirectory(prefix="xe2tune-ocloc-") as scratch:
        try:
            subprocess.run([ocloc, "query", what], cwd=scratch, capture_output=True,
                           timeout=_QUERY_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = Path(scratch) / what
        return found.read_text(errors="replace").strip("\0\n ") if found.exists() else None


def _version(ocloc: str) -> str:
    driver = _query(ocloc, "OCL_DRIVER_VERSION") or "unknown version"
    igc = _query(ocloc, "IGC_REVISION")
    return f"{driver} (IGC {igc})" if igc else driver


def _iga64_beside(ocloc: str) -> str | None:
    beside = Path(ocloc).parent / "iga64"
    return str(beside) if beside.is_file() else shutil.which("iga64")


def _found(ocloc: str, found_by: str) -> CompilerLookup:
    return CompilerLookup(Xe2Compiler(ocloc, _iga64_beside(ocloc), _version(ocloc), found_by),
                          None)


@cache
def locate_xe2_compiler() -> CompilerLookup:
    """Where the Xe2 compiler is, or why there is none (one line naming how to get it).

    Looked up once per process.
    """
    override = ocloc_override()
    if override is not None:
        path = shutil.which(override)
        if path is None:
            return CompilerLookup(None, f"XE2TUNE_OCLOC={override} is not an executable; "
                                        f"{_HOW_TO_GET}")
        if not _knows_xe2(path):
            return CompilerLookup(None, f"XE2TUNE_OCLOC={override} does not know the Xe2 "
                                        f"target {XE2_DEVICE}; {_HOW_TO_GET}")
        return _found(path, "XE2TUNE_OCLOC")
    installed = xe2_compiler_dir()
    launcher = installed / "bin" / "ocloc"
    if (installed / ".complete").is_file() and shutil.which(str(launcher)):
        return _found(str(launcher), f"install dir {installed}")
    on_path = shutil.which("ocloc")
    if on_path is not None and _knows_xe2(on_path):
        return _found(on_path, "PATH")
    seen = (f"the ocloc on PATH ({on_path}) does not know Xe2" if on_path else
            "no ocloc on PATH")
    return CompilerLookup(None, f"Intel's Xe2 compiler is not installed ({installed} is "
                                f"empty, {seen}): {_HOW_TO_GET}")
