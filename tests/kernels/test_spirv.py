"""SPIR-V capture and summary: modules the real runtime compiler dumps, Intel's Xe2 compiler on
them, ``xe2tune inspect``.

Captures build on the embedded opencl:cpu device in a child process (``SYCL_DUMP_IMAGES``). The
probe kernels under ``tests/data/`` have known features: two joint_matrix multiply-adds on
16-lane subgroups (with and without ``grf_size<256>``), 1328 bytes of work-group static memory,
a register-hungry loop, and a required subgroup size the CPU device must actually build.
Captures are kept in the user's capture cache; a test of what the child does gives its probe a
define of its own (``fresh``), so that a child runs.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
from pathlib import Path

import pytest
from _api_fixtures import xe2tune_command

from xe2tune.errors import KernelCompileError
from xe2tune.kernels import (
    DEFAULT_GRF,
    DOUBLE_GRF,
    LARGE_GRF_OPTION,
    CaptureTimeout,
    IsaJob,
    LaunchPlan,
    ProblemSpec,
    SpirvCapture,
    SpirvError,
    Verdict,
    capture_spirv,
    compile_isa_all,
    family_for_mode,
    parse_spirv,
)

DATA = Path(__file__).parents[1] / "data"
TIMEOUT_S = 600.0
PREFILL = ProblemSpec(mode="prefill", head_dim=128, dtype="fp16", q_len=512, kv_len=512,
                      heads_q=8, heads_kv=8, batch=1, causal=False)


def probe_plan(source: str, **defines: int) -> LaunchPlan:
    # Kernel sources are named relative to kernels/; an absolute path names a test source.
    return LaunchPlan(str(DATA / source), (), defines, (), {})


def fresh(**defines: int) -> dict[str, int]:
    """``defines`` and one no kept capture has: the capture runs a child."""
    return {**defines, "NONCE": secrets.randbits(30)}


def kernel(capture: SpirvCapture, name: str):
    (found,) = [k for k in capture.kernels if k.kernel == name]
    return found


def module_of(capture: SpirvCapture, name: str):
    (found,) = [m for m in capture.modules if any(k.kernel == name for k in m.kernels)]
    return found


@pytest.fixture(scope="module", params=[0, 1], ids=["grf-default", "grf-256"])
def probe(request: pytest.FixtureRequest) -> tuple[int, SpirvCapture]:
    return request.param, capture_spirv(probe_plan("spirv_probe.cpp", GRF256=request.param),
                                        timeout_s=TIMEOUT_S)


@pytest.fixture(scope="module")
def prefill_capture(cpu_caps) -> tuple[dict, SpirvCapture]:
    family = family_for_mode("prefill")
    config = family.default_config(PREFILL, cpu_caps)
    plan = family.plan(config, PREFILL, cpu_caps)
    return family.params_from_config(config), capture_spirv(plan, timeout_s=TIMEOUT_S)


def test_bytes_that_are_not_spirv_are_refused():
    with pytest.raises(SpirvError, match="magic"):
        parse_spirv(b"\x7fELF" + bytes(60))
    with pytest.raises(SpirvError, match="whole number"):
        parse_spirv(b"\x03\x02\x23\x07" * 4 + b"xy")


@pytest.mark.requires_xpu
def test_truncated_module_is_refused(probe):
    _, capture = probe
    with pytest.raises(SpirvError, match="truncated"):
        parse_spirv(capture.images[0][:24])  # the header and half an OpCapability


@pytest.mark.requires_xpu
def test_prefill_default_has_no_subgroup_size_no_mads_and_its_staged_tiles(prefill_capture):
    params, capture = prefill_capture
    (module,) = capture.modules
    prefill, pack = kernel(capture, "xe2t_sdpa_prefill"), kernel(capture, "xe2t_sdpa_pack_kv")
    assert prefill.subgroup_size is None and pack.subgroup_size is None
    assert prefill.register_mode == pack.register_mode == DEFAULT_GRF
    assert module.matrix_mads == 0 and "SPV_KHR_cooperative_matrix" not in module.extensions
    # The compiled work_group_static array is what the family's validation budgets for.
    local = family_for_mode("prefill").local_bytes(params, PREFILL)
    assert local > 0 and prefill.local_memory_bytes == local
    assert pack.local_memory_bytes == 0 and module.local_memory_bytes == local
    assert module.entry_points == {k.name: k.function_id for k in module.kernels}


@pytest.mark.requires_xpu
def test_joint_matrix_kernel_two_mads_on_16_lane_subgroups(probe):
    grf256, capture = probe
    mma = kernel(capture, "xe2t_probe_mma")
    module = module_of(capture, "xe2t_probe_mma")
    assert mma.subgroup_size == 16 and mma.matrix_mads == 2 and module.matrix_mads == 2
    assert module.matrix_mads_by_function == {"__sycl_kernel_xe2t_probe_mma": 2}
    assert mma.register_mode == (DOUBLE_GRF if grf256 else DEFAULT_GRF)
    assert "SPV_KHR_cooperative_matrix" in module.extensions
    assert "CooperativeMatrixKHR" in module.capabilities
    assert mma.local_memory_bytes == 0
    summary = capture.summary_dict()
    assert summary["matrix_mads"] == 2 and summary["subgroup_sizes"] == [16]


@pytest.mark.requires_xpu
def test_local_memory_is_attributed_to_the_kernel_that_declares_it(probe):
    _, capture = probe
    local = kernel(capture, "xe2t_probe_local")
    assert local.local_memory_bytes == 300 * 4 + 64 * 2
    assert local.subgroup_size is None and local.register_mode == DEFAULT_GRF
    assert local.matrix_mads == 0 and kernel(capture, "xe2t_probe_spill").local_memory_bytes == 0
    assert capture.summary_dict()["local_memory_bytes"] == 1328


@pytest.mark.requires_xpu
def test_required_subgroup_size_kernel_is_built_for_real():
    # The CPU runtime builds it only under vectorizer mode 0: the capture must get there.
    capture = capture_spirv(probe_plan("spirv_subgroup.cpp", **fresh()), timeout_s=TIMEOUT_S)
    assert kernel(capture, "xe2t_probe_subgroup_sum").subgroup_size == 16
    assert capture.build_seconds > 0 and not capture.cached


@pytest.mark.requires_xpu
def test_a_capture_is_kept_and_another_source_or_define_is_captured_anew():
    defines = fresh()
    first = capture_spirv(probe_plan("spirv_probe.cpp", **defines), timeout_s=TIMEOUT_S)
    again = capture_spirv(probe_plan("spirv_probe.cpp", **defines), timeout_s=TIMEOUT_S)
    assert not first.cached and again.cached and again.to_dict()["cached"]
    assert again.images == first.images and again.modules == first.modules
    assert (again.log, again.build_seconds) == (first.log, first.build_seconds)
    assert again.capture_seconds < first.capture_seconds
    other_define = capture_spirv(probe_plan("spirv_probe.cpp", **defines, GRF256=1),
                                 timeout_s=TIMEOUT_S)
    source = str(DATA / "spirv_probe.cpp")
    edited = {source: Path(source).read_text() + "\n// edited\n"}
    other_source = capture_spirv(probe_plan("spirv_probe.cpp", **defines), timeout_s=TIMEOUT_S,
                                 sources=edited)
    assert not other_define.cached and not other_source.cached
    # A fresh build (the runtime's own cache off) is kept apart from the captures above, and
    # kept: the first one here was a fresh build too (its NONCE was new), so the SPIR-V is equal.
    built_fresh, kept_fresh = (capture_spirv(probe_plan("spirv_probe.cpp", **defines),
                                             timeout_s=TIMEOUT_S, fresh_build=True)
                               for _ in range(2))
    assert not built_fresh.cached and kept_fresh.cached
    assert kept_fresh.images == built_fresh.images == first.images


@pytest.mark.requires_xpu
def test_failed_build_raises_with_the_log(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(KernelCompileError) as caught:
        capture_spirv(probe_plan("spirv_probe.cpp", BROKEN=1), timeout_s=TIMEOUT_S)
    assert "this build fails on purpose" in caught.value.log
    assert len(caught.value.args[0].splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # the scratch directory is gone


@pytest.mark.requires_xpu
def test_timeout_kills_the_child_and_leaves_no_scratch(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(CaptureTimeout, match="0.5 s"):
        capture_spirv(probe_plan("spirv_probe.cpp", **fresh()), timeout_s=0.5)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.requires_xpu
def test_xe2_compiler_reports_the_spill_and_the_matrix_kernel_of_captured_modules(
        probe, xe2_compiler, monkeypatch, tmp_path):
    monkeypatch.setenv("XE2TUNE_CACHE_DIR", str(tmp_path))
    grf256, capture = probe
    spill_module = module_of(capture, "xe2t_probe_spill")
    mma_module = module_of(capture, "xe2t_probe_mma")
    jobs = [IsaJob(capture.images[capture.modules.index(m)], m, "bmg")
            for m in (spill_module, mma_module)]
    spill_isa, mma_isa = compile_isa_all(jobs)
    assert spill_isa.verdict is Verdict.COMPILED and spill_isa.target == "bmg"
    assert spill_isa.options == () and "for bmg" in spill_isa.text()
    spill = next(k for k in spill_isa.kernels if k.kernel == "xe2t_probe_spill")
    assert spill.grf_count == 128 and spill.spill_bytes > 0
    assert spill.counts.scratch_messages > 0
    assert mma_isa.options == ((LARGE_GRF_OPTION,) if grf256 else ())
    (mma,) = [k for k in mma_isa.kernels if k.kernel == "xe2t_probe_mma"]
    assert mma.verdict is Verdict.COMPILED and mma.has_dpas and mma.simd == 16
    assert mma.grf_count == (256 if grf256 else 128) and mma.counts.dpas >= 2


def run_cli(*args: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([xe2tune_command(), *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=timeout)


@pytest.mark.requires_xpu
def test_inspect_json_on_the_live_cpu_device(cpu_caps):
    proc = run_cli("inspect", "--head-dim", "64", "--seq", "128", "--device", "opencl:cpu",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["family"] == "sdpa_prefill" and out["device"] == "opencl:cpu"
    problem = ProblemSpec(**out["problem"])
    family = family_for_mode("prefill")
    config = family.default_config(problem, cpu_caps)
    assert out["config"] == config.to_dict()
    spirv = out["spirv"]
    kernels = {k["kernel"]: k for k in spirv["kernels"]}
    assert set(kernels) == {"xe2t_sdpa_prefill", "xe2t_sdpa_pack_kv"}
    local = family.local_bytes(family.params_from_config(config), problem)
    assert kernels["xe2t_sdpa_prefill"]["local_memory_bytes"] == local
    assert spirv["matrix_mads"] == 0 and spirv["subgroup_sizes"] == []
    assert spirv["register_modes"] == [DEFAULT_GRF] and spirv["build_s"] > 0
    assert out["isa"] is None


@pytest.mark.parametrize(("args", "needle"), [
    (["--target", "nosuch"], "accepted: b580"),
    (["--target", "b580", "--family", "nosuch"], "accepted: sdpa_xmx_prefill"),
    (["--target", "b580", "--device", "opencl:cpu"], "exclude each other"),
])
def test_inspect_bad_input_is_one_line(args, needle):
    proc = run_cli("inspect", "--head-dim", "64", "--seq", "128", *args, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.requires_xpu
def test_bench_json_carries_the_spirv_summary():
    proc = run_cli("bench", "--head-dim", "64", "--seq", "64", "--heads-q", "2", "--heads-kv",
                   "2", "--warmup", "1", "--iters", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    kernels = {k["kernel"] for k in out["spirv"]["kernels"]}
    assert "xe2t_sdpa_prefill" in kernels and out["spirv"]["matrix_mads"] == 0


def prefill_hd64_config(subgroup_size: int) -> str:
    """A prefill config for hd 64 with the given subgroup size, valid on the CPU device."""
    return json.dumps({
        "family": "sdpa_prefill", "shape_qk": [96, 64, 16], "shape_pv": [96, 16, 64],
        "shape_out": [96, 64], "subgroup_layout": [16, 1], "stages": 1, "vtiles": 4,
        "subgroup_size": subgroup_size,
        "knobs": {"kv_pack": False, "kv_stage": True, "rows_per_item": 6}})


def bench_for_b580(subgroup_size: int) -> dict:
    """``bench --isa-target b580 --json`` of that config on the CPU device, which must exit 0."""
    proc = run_cli("bench", "--head-dim", "64", "--seq", "64", "--heads-q", "2", "--heads-kv",
                   "2", "--warmup", "1", "--iters", "3", "--isa-target", "b580", "--json",
                   "--config", prefill_hd64_config(subgroup_size))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.requires_xpu
def test_bench_isa_target_reports_the_build_that_gpu_would_run(xe2_compiler):
    # Timed on the CPU device; the ISA is of the same config planned for the B580 (its
    # register mode and policy), compiled by Intel's Xe2 compiler for bmg. The config is given:
    # the CPU's own default has subgroup size 8 on AVX2 machines, which the B580 lacks.
    out = bench_for_b580(16)
    assert out["status"] == "ok" and out["isa"]["target"] == "bmg"
    (module,) = out["isa"]["modules"]
    assert module["verdict"] == "compiled" and module["target"] == "bmg"
    assert {k["kernel"] for k in module["kernels"]} >= {"xe2t_sdpa_prefill"}


@pytest.mark.requires_xpu
def test_bench_isa_target_says_why_a_config_has_no_build_on_that_gpu(xe2_compiler):
    # Subgroup size 8 runs on the CPU device; the B580 has only 16 and 32: timed, no ISA.
    out = bench_for_b580(8)
    assert out["status"] == "ok" and out["isa"] == {
        "error": "the config is not valid on b580: subgroup_size 8 is not supported by the "
                 "device (16, 32)"}
