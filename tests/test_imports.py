"""The read side runs without the device side, and imports point one way.

``xe2tune.db``, ``.api`` and ``.dashboards`` and the commands that only read results (serve,
results, best, export, report) must not load dpctl or a SYCL/OpenCL/Level Zero library: each
check runs in a fresh interpreter and reads its ``sys.modules`` and ``/proc/self/maps``.
The package graph is read from the source: kernels <- harness <- tuner, db never imports harness
or tuner, nobody imports another package's private modules.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from xe2tune.db import open_store
from xe2tune.testing import launcher_config, ok_result, prefill, tune

ROOT = Path(__file__).resolve().parents[1]

# Writes what the interpreter loaded to $XE2TUNE_PROBE when it exits (after sys.exit too).
PROBE = """
import atexit, json, os, sys

def _report():
    with open('/proc/self/maps') as maps:
        paths = {line.split()[-1] for line in maps if '/' in line}
    loaded = [m for m in sys.modules
              if m.split('.')[0] == 'dpctl' or m.startswith(('xe2tune.harness', 'xe2tune.tuner',
                                                             'xe2tune._sdpa'))]
    with open(os.environ['XE2TUNE_PROBE'], 'w') as out:
        json.dump({'modules': sorted(loaded), 'libraries': sorted(paths)}, out)

atexit.register(_report)
"""
RUN_CLI = PROBE + """
from xe2tune.cli import main
sys.argv = ['xe2tune', *sys.argv[1:]]
main()
"""
# Shared objects of the device runtime: SYCL, Unified Runtime, OpenCL (ICD loader and Intel's
# CPU runtime), Level Zero, and dpctl's own extension modules.
DEVICE_LIBRARIES = ("libsycl", "libur_", "libOpenCL", "libintelocl", "libze_", "/dpctl/")


def _device_side(report: dict) -> list[str]:
    libraries = [p for p in report["libraries"] if any(s in p for s in DEVICE_LIBRARIES)]
    return report["modules"] + libraries


def _probe(tmp_path: Path, code: str, *args: str, env: dict | None = None) -> tuple[dict, str]:
    out = tmp_path / f"probe-{time.monotonic_ns()}.json"
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         env={**os.environ, **(env or {}), "XE2TUNE_PROBE": str(out)},
                         timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    return json.loads(out.read_text()), run.stdout


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database with one tuned problem (default and a faster config)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('imports')}/results.db"
    store = open_store(url)
    try:
        tune(store, prefill(512), [ok_result(launcher_config(), 2e-3),
                                   ok_result(launcher_config(bq=32), 1e-3)])
    finally:
        store.close()
    return url


def test_read_side_packages_import_without_the_device_runtime(tmp_path: Path) -> None:
    code = PROBE + "import xe2tune, xe2tune.db, xe2tune.api.main, xe2tune.dashboards, xe2tune.cli"
    report, _ = _probe(tmp_path, code)
    assert _device_side(report) == []


def test_the_probe_sees_the_device_runtime_when_it_is_loaded(tmp_path: Path) -> None:
    # the check above can fail: sdpa (device side) loads dpctl and libsycl on first use
    report, _ = _probe(tmp_path, PROBE + "import xe2tune; xe2tune.sdpa")
    assert "dpctl" in report["modules"] and "xe2tune._sdpa" in report["modules"]
    assert any("libsycl" in p for p in report["libraries"])


@pytest.mark.parametrize("args", [
    ("results",), ("results", "--format", "json"),
    ("best", "--head-dim", "128", "--dtype", "fp16", "--seq", "512", "--json"),
    ("export", "--format", "cpp"), ("report", "--out", "report.html"),
], ids=lambda args: " ".join(args[:2]))
def test_reading_commands_never_load_the_device_runtime(tmp_path: Path, tuned_db: str,
                                                        args: tuple[str, ...]) -> None:
    report, stdout = _probe(tmp_path, RUN_CLI, *args, "--db", tuned_db)
    assert _device_side(report) == []
    assert stdout or (tmp_path / "report.html").stat().st_size > 0  # the command did its job


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_without_the_device_runtime(tmp_path: Path, tuned_db: str) -> None:
    port = _free_port()
    probe = tmp_path / "serve.json"
    server = subprocess.Popen(
        [sys.executable, "-c", RUN_CLI, "serve", "--port", str(port), "--db", tuned_db],
        env={**os.environ, "XE2TUNE_PROBE": str(probe)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/v1/devices", timeout=2).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "serve never answered"
                time.sleep(0.1)
        for path in ("/v1/best?head_dim=128&dtype=fp16&seq=512", "/v1/results", "/"):
            with urllib.request.urlopen(base + path, timeout=30) as response:
                assert response.status == 200, path
        with open(f"/proc/{server.pid}/maps") as maps:
            live = sorted({line.split()[-1] for line in maps if "/" in line})
        assert [p for p in live if any(s in p for s in DEVICE_LIBRARIES)] == []
    finally:  # SIGINT: uvicorn stops, main() exits and the probe writes its report
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=30)
    assert _device_side(json.loads(probe.read_text())) == [], stderr


# -- the package graph -----------------------------------------------------------------------

PACKAGES = ("kernels", "harness", "tuner", "db", "api", "dashboards")
# src/xe2tune modules every package may import
SHARED = {"errors", "config", "measurement", "_lazy"}
ALLOWED = {  # package -> the packages it may import; data flows tuner -> kernels -> harness -> db
    "kernels": set(),
    "harness": {"kernels"},
    "tuner": {"kernels", "harness", "db"},
    "db": {"kernels"},
    "dashboards": {"db", "kernels"},
    "api": {"db", "dashboards", "kernels"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def test_imports_point_one_way_and_only_through_package_surfaces() -> None:
    wrong = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).glob("*.py")):
            for line, module in _imports(path):
                parts = module.split(".")
                if parts[0] != "xe2tune" or len(parts) == 1 or parts[1] == package:
                    continue
                where = f"{path.relative_to(ROOT)}:{line} imports {module}"
                if parts[1] not in SHARED | ALLOWED[package] and module != "xe2tune":
                    wrong.append(f"{where} (against the flow)")
                elif len(parts) > 2 and parts[2].startswith("_"):
                    wrong.append(f"{where} (a private module of another package)")
    assert wrong == []


def test_the_cli_and_the_test_support_use_only_package_surfaces() -> None:
    wrong = []
    for folder in ("src/xe2tune/cli", "src/xe2tune/testing"):
        own = Path(folder).name
        for path in sorted((ROOT / folder).glob("*.py")):
            for line, module in _imports(path):
                parts = module.split(".")
                if (parts[0] == "xe2tune" and len(parts) > 2 and parts[1] != own
                        and parts[2].startswith("_")):
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert wrong == []


def test_the_test_support_imports_nothing_of_the_test_extra() -> None:
    # pytest (the [test] extra) made unimportable: the builders still import.
    code = ("import sys; sys.modules['pytest'] = None; import xe2tune.testing; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['pytest']"  # only the blocked entry itself


def test_the_graph_check_catches_a_wrong_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from xe2tune.harness import TrialStatus\n"
                      "def f():\n    from xe2tune.harness._runner import MeasureRequest\n")
    assert _imports(sample) == [(1, "xe2tune.harness"), (3, "xe2tune.harness._runner")]
