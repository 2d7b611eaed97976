"""How fast ``xe2tune serve`` answers after it starts, and how much memory it holds then.

Starts the server N times on a fresh migrated SQLite database and reports, per start, the wall
seconds from the process start to the first 200 from ``GET /v1/devices`` and the resident set
(VmRSS) of the server process at that moment, then the medians::

    python benchmarks/serve_startup.py --runs 5

To compare with another commit, lay its packages out as the installed ``xe2tune`` package and
put that first on the path (the editable install's finder comes after ``PYTHONPATH``)::

    git archive <commit> | tar -x -C /tmp/old && mkdir /tmp/old/root && \\
      cp -r /tmp/old/src/xe2tune /tmp/old/root/ && \\
      for p in kernels harness tuner db api dashboards; do \
        cp -r /tmp/old/$p /tmp/old/root/xe2tune/; done
    PYTHONPATH=/tmp/old/root python benchmarks/serve_startup.py --runs 5

Timings on a shared machine drift; alternate the two trees in one session and compare medians.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CLI = [sys.executable, "-c",
       "import sys; from xe2tune.cli import main; sys.argv[0] = 'xe2tune'; main()"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def one_start(db_url: str, timeout_s: float = 120.0) -> tuple[float, int]:
    """(seconds to the first answer, resident bytes then) of one server start."""
    port = _free_port()
    started = time.perf_counter()
    server = subprocess.Popen([*CLI, "serve", "--port", str(port), "--db", db_url],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/devices",
                                            timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.perf_counter() - started > timeout_s:
                    raise RuntimeError("the server never answered") from None
                time.sleep(0.02)
        return time.perf_counter() - started, _rss_bytes(server.pid)
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        db_url = f"sqlite:///{scratch}/results.db"
        subprocess.run([*CLI, "migrate", "--db", db_url], check=True, capture_output=True)
        starts = [one_start(db_url) for _ in range(args.runs)]
    seconds = [s for s, _ in starts]
    mib = [r / 2**20 for _, r in starts]
    print("start to first answer, s:", " ".join(f"{s:.2f}" for s in seconds),
          f"(median {statistics.median(seconds):.2f})")
    print("resident memory then, MiB:", " ".join(f"{m:.0f}" for m in mib),
          f"(median {statistics.median(mib):.0f})")


if __name__ == "__main__":
    main()
