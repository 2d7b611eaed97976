"""``xe2tune search --target <catalog GPU> --dry-run``: spaces, baselines and SPIR-V, no GPU."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import subprocess

import pytest

from xe2tune.cli._dry_run import _space_key
from xe2tune.kernels import (
    DEFAULT_GRF,
    DOUBLE_GRF,
    INSTALL_SCRIPT,
    ProblemSpec,
    Verdict,
    catalog_device,
    family_names,
    get_family,
    locate_xe2_compiler,
)

B580 = catalog_device("b580").caps


@pytest.mark.parametrize("name", family_names())
def test_validity_never_reads_what_the_dry_run_shares_across_problems(name):
    # The dry run enumerates a space once per _space_key; that is only right while no family's
    # validation reads the sequence lengths, batch or mask. Checked on a sample of each space.
    family = get_family(name)
    dtype = "fp16"
    if family.mode == "prefill":
        a = ProblemSpec("prefill", 128, dtype, 512, 512, heads_q=16, heads_kv=16, batch=4)
        b = dataclasses.replace(a, q_len=8192, kv_len=8192, batch=1, causal=True)
    else:
        a = ProblemSpec("decode", 128, dtype, 1, 1024, heads_q=32, heads_kv=8)
        b = dataclasses.replace(a, kv_len=32768, batch=3, causal=True)
    assert _space_key(family, a, B580) == _space_key(family, b, B580)
    space = family.parameter_space(a)
    rng = random.Random(0)
    points = list(itertools.product(*space.values()))
    for values in rng.sample(points, min(400, len(points))):
        config = family.config_from_params(a, dict(zip(space, values, strict=True)))
        assert family.invalid_reason(config, a, B580) == family.invalid_reason(config, b, B580)


def _dry_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["xe2tune", "search", *args], capture_output=True, text=True,
                          timeout=1800)


@pytest.mark.requires_xpu
def test_b580_dry_run_prints_spaces_baselines_and_checked_spirv():
    out = _dry_run("--head-dim", "128", "--target", "b580", "--dry-run", "--mode", "prefill",
                   "--seq", "512", "--no-causal", "--dtype", "fp16", "--sample", "2", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    (problem,) = report["problems"]
    spaces = {s["family"]: s for s in problem["spaces"]}
    # Only the matrix-engine family: the vector-lane one spills on Xe2 and is not searched.
    assert set(spaces) == {"sdpa_xmx_prefill"}
    assert all(0 < s["valid"] < s["cartesian"] for s in spaces.values())
    baselines = {b["label"]: b for b in problem["baselines"]}
    assert baselines["seed 000 SageV1"]["valid"] and baselines["SYCL*TLA example"]["valid"]
    assert problem["default"]["family"] == "sdpa_xmx_prefill"
    assert any(o.startswith("-DXE2T_") for o in problem["build_options"])
    builds = report["builds"]
    xmx = [b for b in builds if b["config"]["family"] == "sdpa_xmx_prefill"]
    # The valid baselines, the default (SageV1 itself here) and two random valid configs.
    assert {"seed 000 SageV1", "SYCL*TLA example", "sample"} <= {b["label"] for b in xmx}
    for build in builds:
        assert build["error"] is None, build
    for build in xmx:
        spirv = build["spirv"]
        assert spirv["matrix_mads"] == build["expected_matrix_mads"] > 0, build
        assert spirv["subgroup_sizes"] == [16]
        grf = build["config"]["knobs"]["grf"]
        assert spirv["register_modes"] == [DOUBLE_GRF if grf == 256 else DEFAULT_GRF]
        # DPAS through the native Xe built-ins (calls IGC resolves), not joint_matrix.
        assert "SPV_KHR_cooperative_matrix" not in spirv["extensions"]
    _check_isa(report, builds)


def _check_isa(report: dict, builds: list[dict]) -> None:
    # With Intel's Xe2 compiler (always under CI) every build is compiled for the B580 (bmg);
    # without it the report says why, naming how to get it.
    lookup = locate_xe2_compiler()
    if lookup.compiler is None and not os.environ.get("CI"):
        assert report["isa_target"] is None and INSTALL_SCRIPT in report["isa_unavailable"]
        assert all(b["isa"] is None for b in builds)
        return
    assert report["isa_target"] == "bmg" and report["isa_unavailable"] is None
    for build in builds:
        modules = build["isa"]
        assert len(modules) == build["spirv"]["modules"], build
        assert build["isa_verdict"] in {v.value for v in Verdict}
        kernels = [k for m in modules for k in m["kernels"]]
        assert {k["kernel"] for k in kernels} == {k["kernel"] for k in build["spirv"]["kernels"]}
        compiled = [k for k in kernels if k["verdict"] == "compiled"]
        for k in compiled:
            assert k["target"] == "bmg" and k["grf_count"] in (128, 256)
            assert k["threads_per_eu"] == (4 if k["grf_count"] == 256 else 8)
            assert k["dpas"] is not None and k["block2d_loads"] is not None
        spills = [k["spill_bytes"] for k in compiled]
        assert build["isa_spill_bytes"] == (max(spills) if spills else None)
        if build["config"]["family"] == "sdpa_xmx_prefill":
            grf = build["config"]["knobs"]["grf"]
            assert all(k["grf_count"] == grf for k in compiled), build


def test_target_without_dry_run_is_a_one_line_error():
    out = _dry_run("--head-dim", "128", "--target", "b580")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "--dry-run" in out.stderr


def test_unknown_target_lists_the_catalog():
    out = _dry_run("--head-dim", "128", "--target", "b999", "--dry-run")
    assert out.returncode == 2 and "b580" in out.stderr and "Traceback" not in out.stderr
