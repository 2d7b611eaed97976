"""``xe2tune devices`` and device selection errors, through the installed console script."""

from __future__ import annotations

import json
import os
import subprocess


def run(*args, env=None):
    return subprocess.run(["xe2tune", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_devices_json_lists_the_cpu_runtime():
    proc = run("devices", "--json")
    assert proc.returncode == 0, proc.stderr
    devices = json.loads(proc.stdout)
    cpu = [d for d in devices if d["filter"].startswith("opencl:cpu")]
    assert cpu and cpu[0]["local_mem_bytes"] > 0 and 16 in cpu[0]["subgroup_sizes"]


def test_unknown_device_is_a_one_line_error_listing_devices():
    proc = run("bench", "--head-dim", "128", "--seq", "64", "--device", "level_zero:gpu:7")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "level_zero:gpu:7" in lines[0] and "opencl:cpu" in lines[0]


def test_no_runtime_at_all_says_how_to_install_one():
    proc = run("devices", env={"OCL_ICD_FILENAMES": "/nonexistent/libnothing.so"})
    assert proc.returncode == 2
    assert "pip install intel-opencl-rt" in proc.stderr
    assert "Traceback" not in proc.stderr
