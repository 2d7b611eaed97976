"""Another revision's kernel sources, for benchmarks that set them beside this tree's."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kernel_sources(revision: str) -> dict[str, str]:
    """The .cpp/.hpp files under kernels/ at git ``revision``, by file name (the ``sources``
    that :func:`xe2tune.kernels.build_program` builds instead of the working tree's)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              check=True).stdout

    names = git("ls-tree", "--name-only", f"{revision}:kernels").split()
    return {n: git("show", f"{revision}:kernels/{n}") for n in names
            if n.endswith((".cpp", ".hpp"))}
