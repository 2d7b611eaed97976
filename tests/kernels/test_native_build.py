"""The native extension's first use: compiled once however many processes start together.

A new machine's test run starts its workers at once, and a search may start beside a campaign
worker: each finds no extension in the user cache. The first compiles it; the others wait for
that compile and load its module instead of compiling their own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Loads the extension, checks it answers through dpctl's queue, and prints the module's path.
_FIRST_USE = (
    "from xe2tune.harness import open_queue\n"
    "from xe2tune.kernels import load_extension\n"
    "ext = load_extension()\n"
    "assert ext.can_build_sycl(open_queue('opencl:cpu'))\n"
    "print(ext.__file__)\n"
)


@pytest.mark.requires_xpu
def test_processes_starting_together_compile_the_extension_once(tmp_path: Path):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    calls = tmp_path / "compiler-calls"
    counting = tmp_path / "counting-cxx"
    counting.write_text(f'#!/bin/sh\necho "$$" >> "{calls}"\nexec "{cxx}" "$@"\n')
    counting.chmod(0o755)
    env = {**os.environ, "CXX": str(counting), "XE2TUNE_CACHE_DIR": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", _FIRST_USE], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(3)]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], [err for _, err in outputs]
    assert len({out.strip() for out, _ in outputs}) == 1  # one module, loaded by all three
    assert len(calls.read_text().split()) == 1
