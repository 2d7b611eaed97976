"""``xe2tune devices`` and device selection errors, through the installed console script."""

from __future__ import annotations

import json
import os
import subprocess

import pytest


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


def test_bench_json_checks_correctness_and_reports_a_roofline_fraction():
    proc = run("bench", "--head-dim", "64", "--dtype", "fp16", "--seq", "129", "--heads-q",
               "4", "--heads-kv", "2", "--causal", "--iters", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["correctness"]["passed"]
    assert out["correctness"]["nonfinite"] == 0
    assert 0 < out["roofline"]["roofline_fraction"]
    t = out["timing"]
    assert 1 <= t["iterations"] <= 20 and len(t["samples"]) == t["iterations"]
    # at least seed 002's 4 sets, more where the host's last-level cache would hold 4
    assert t["min_s"] <= t["median_s"] <= t["max_s"] and 4 <= t["n_buf"] <= 64
    assert out["problem"]["q_len"] == 129 and out["family"] == "sdpa_prefill"
    # a caveat such as a cache-resident rotation is one line, not a Python warning with source
    assert "UserWarning" not in proc.stderr and "Traceback" not in proc.stderr
    assert all(line.startswith("warning: ") for line in proc.stderr.splitlines()
               if "warning" in line.lower())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--head-dim", "0", "--seq", "64"], "head dim 0"),
        (["--head-dim", "1000", "--seq", "64"], "head dim 1000"),
        (["--head-dim", "64", "--seq", "64", "--dtype", "fp8"], "dtype 'fp8'"),
        (["--head-dim", "64", "--seq", "64", "--config", "{not json"], "--config"),
        (["--head-dim", "64", "--seq", "64", "--config", '{"stages": 1}'], "missing"),
        (["--head-dim", "64", "--seq", "64", "--config", "/nonexistent.json"],
         "--config /nonexistent.json: no such file"),
        (["--head-dim", "64", "--seq", "64", "--iters", "0"], "iterations"),
        (["--head-dim", "64"], "--seq"),
    ],
)
def test_bench_bad_input_is_one_line(args, needle):
    proc = run("bench", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
