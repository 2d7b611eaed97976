"""scripts/install-xe2-compiler: one clear line when the archive is out of reach, nothing left
behind, and a complete install left as it is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xe2tune.kernels import locate_xe2_compiler

SCRIPT = Path(__file__).parents[2] / "scripts" / "install-xe2-compiler"

pytestmark = pytest.mark.skipif(shutil.which("apt-get") is None,
                                reason="the install script needs apt-get (a Debian host)")


def test_an_unreachable_archive_is_one_line_and_leaves_nothing(tmp_path):
    target = tmp_path / "compiler"
    out = subprocess.run(["bash", str(SCRIPT), str(target)], capture_output=True, text=True,
                         timeout=120, env={"PATH": "/usr/bin:/bin",
                                           "XE2TUNE_DEBIAN_MIRROR": "http://127.0.0.1:9/debian"})
    assert out.returncode == 1 and out.stdout == ""
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("install-xe2-compiler: cannot reach Debian's archive at "
                           "http://127.0.0.1:9/debian (suite sid)")
    assert list(tmp_path.iterdir()) == []


def test_a_complete_install_is_left_as_it_is():
    compiler = locate_xe2_compiler().compiler
    if compiler is None or not compiler.found_by.startswith("install dir"):
        pytest.skip("no compiler installed by the script here")
    folder = Path(compiler.ocloc).parents[1]
    before = (folder / ".complete").stat().st_mtime_ns
    out = subprocess.run(["bash", str(SCRIPT), str(folder)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == str(folder / "bin" / "ocloc")
    assert (folder / ".complete").stat().st_mtime_ns == before
