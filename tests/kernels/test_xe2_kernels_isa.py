"""The xmx family through Intel's own Xe2 compiler (ocloc + IGC, scripts/install-xe2-compiler).

What a B580 or Arc 140V owner's driver would do with the SPIR-V xe2tune builds: the seeded
baselines and the defaults (also latent attention's: MLA prefill D 192 / Dv 128, and absorbed
MLA decode D 576 / Dv 512, whose V columns the decode splits among work-groups) compile for bmg
and lnl-m without spills, with one dpas per modelled multiply-add, K and V through 2D block loads
(transposed and VNNI) and no scattered global load in the K loop. Also kept here: IGC 2.40's
crash on joint_matrix (the reason the family does not use it), so that a compiler that stops
crashing is noticed.

Without the compiler these tests skip with the reason, except under CI, which installs it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from xe2tune.kernels import (
    IsaJob,
    LaunchPlan,
    ProblemSpec,
    Verdict,
    capture_spirv,
    catalog_device,
    compile_isa_all,
)
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily

CRASH = Path(__file__).parents[1] / "data" / "igc_crash" / "joint_matrix_crash.cpp"
TARGETS = ("bmg", "lnl-m")
TIMEOUT_S = 600.0

pytestmark = pytest.mark.usefixtures("xe2_compiler")  # skipped without it, failed under CI

PREFILL, DECODE = XmxPrefillFamily(), XmxDecodeFamily()


def prefill(head_dim: int, dtype: str, head_dim_v: int | None = None) -> ProblemSpec:
    return ProblemSpec(mode="prefill", head_dim=head_dim, dtype=dtype, q_len=512, kv_len=512,
                       heads_q=8, heads_kv=8, batch=1, causal=False, head_dim_v=head_dim_v)


def decode(head_dim: int, dtype: str, heads_q: int = 8, heads_kv: int = 2) -> ProblemSpec:
    return ProblemSpec(mode="decode", head_dim=head_dim, dtype=dtype, q_len=1, kv_len=4096,
                       heads_q=heads_q, heads_kv=heads_kv, batch=1, causal=False)


def _cases():
    b580 = catalog_device("b580").caps
    cases = []
    for dtype in ("fp16", "bf16"):
        for family, problem in ((PREFILL, prefill(128, dtype)), (PREFILL, prefill(64, dtype)),
                                (DECODE, decode(128, dtype)), (DECODE, decode(64, dtype)),
                                (PREFILL, prefill(192, dtype, head_dim_v=128)),
                                (DECODE, decode(576, dtype, heads_q=16, heads_kv=1))):
            configs = [("default", family.default_config(problem, b580))]
            configs += [(b.label, b.config) for b in family.baselines(problem, b580)
                        if family.invalid_reason(b.config, problem, b580) is None]
            for label, config in configs:
                dv = f"-dv{problem.head_dim_v}" if problem.is_mla else ""
                cases.append(pytest.param(family, problem, config,
                                          id=f"{problem.mode}-hd{problem.head_dim}{dv}-{dtype}-"
                                             f"{label.replace(' ', '_')}"))
    return cases


@pytest.mark.parametrize("family,problem,config", _cases())
def test_baselines_and_defaults_compile_without_spills_on_dpas_and_2d_loads(
        family, problem, config):
    caps = catalog_device("b580").caps
    capture = capture_spirv(family.plan(config, problem, caps), timeout_s=TIMEOUT_S)
    jobs = [IsaJob(image, module, target) for target in TARGETS
            for image, module in zip(capture.images, capture.modules, strict=True)]
    reports = compile_isa_all(jobs, timeout_s=TIMEOUT_S)
    main = family.kernel_names[0]
    for report in reports:
        assert report.verdict is Verdict.COMPILED, report.text()
        for kernel in report.kernels:
            assert kernel.verdict is Verdict.COMPILED, kernel.text()
            assert kernel.spill_bytes == 0 and not kernel.private_bytes, kernel.text()
            if kernel.kernel != main:
                continue
            grf = dict(config.knobs)["grf"]
            assert kernel.grf_count == grf and kernel.threads_per_eu == (4 if grf == 256 else 8)
            assert kernel.has_dpas, kernel.text()
            c = kernel.counts
            assert c.dpas == family.expected_matrix_mads(config, problem), kernel.text()
            forms = c.block2d_loads_by_form
            # Per K block and subgroup: K^T in NF * D / 16 transposed loads, V in
            # NF * Dv / 16 VNNI loads, each in the program once (the K loop is not unrolled).
            nf = config.bk // config.subgroup_layout[1] // 16
            assert forms.get("transposed") == nf * problem.head_dim // 16, kernel.text()
            assert forms.get("vnni") == nf * family.dv_columns(config, problem) // 16, \
                kernel.text()
            assert c.scratch_messages == 0, kernel.text()
            # The K loop: every DPAS and 2D block load in it, no other global load or store
            # (Q comes from local memory), prefetches from the loop, not once per subgroup
            # share: a work-group's messages are dealt over its subgroups.
            loop = kernel.dpas_loop
            assert loop is not None, kernel.text()
            assert loop.dpas == c.dpas and loop.block2d_loads == c.block2d_loads, kernel.text()
            assert loop.global_loads == loop.global_stores == loop.scratch_messages == 0
            if config.stages > 0:
                assert loop.block2d_prefetches >= 1, kernel.text()


def _fp8_cases():
    b580 = catalog_device("b580").caps
    cases = []
    for family, problem in (
            (PREFILL, dataclasses.replace(prefill(128, "fp16"), kv_dtype="e4m3")),
            (PREFILL, dataclasses.replace(prefill(64, "bf16"), kv_dtype="e5m2", heads_kv=2)),
            (DECODE, dataclasses.replace(decode(128, "bf16"), kv_dtype="e4m3")),
            (DECODE, dataclasses.replace(decode(128, "fp16"), kv_dtype="e5m2")),
            (DECODE, dataclasses.replace(decode(576, "bf16", 128, 1), kv_dtype="e4m3"))):
        cases.append(pytest.param(family, problem, family.default_config(problem, b580),
                                  id=f"{problem.mode}-hd{problem.head_dim}-{problem.dtype}-"
                                     f"{problem.kv_dtype}-default"))
    return cases


@pytest.mark.parametrize("family,problem,config", _fp8_cases())
def test_fp8_kv_defaults_compile_without_spills_on_dpas(family, problem, config):
    """FP8 K/V: the same DPAS as the fp16/bf16 kernels (K/V converted after the load), their
    own loads (K: per-lane 16-byte loads; V: one 8-bit VNNI 2D block load per fragment), no
    spills on bmg and lnl-m."""
    caps = catalog_device("b580").caps
    capture = capture_spirv(family.plan(config, problem, caps), timeout_s=TIMEOUT_S)
    jobs = [IsaJob(image, module, target) for target in TARGETS
            for image, module in zip(capture.images, capture.modules, strict=True)]
    for report in compile_isa_all(jobs, timeout_s=TIMEOUT_S):
        assert report.verdict is Verdict.COMPILED, report.text()
        for kernel in report.kernels:
            assert kernel.spill_bytes == 0 and not kernel.private_bytes, kernel.text()
            if kernel.kernel == family.kernel_names[0]:
                c = kernel.counts
                assert c.dpas == family.expected_matrix_mads(config, problem), kernel.text()
                nf = config.bk // config.subgroup_layout[1] // 16
                assert c.block2d_loads_by_form == {
                    "vnni": nf * family.dv_columns(config, problem) // 16}, kernel.text()
                assert c.scratch_messages == 0, kernel.text()


def test_igc_still_crashes_on_joint_matrix_apply_to_a_struct_member():
    """The recorded reproducer (tests/data/igc_crash/joint_matrix_crash.cpp) still crashes IGC.

    When this fails, the installed IGC no longer crashes there: joint_matrix may be usable for
    the xmx family again (compare its ISA with the built-ins').
    """
    plan = LaunchPlan(str(CRASH), (), {}, (), {}, needs_intel_gpu=True)
    control = LaunchPlan(str(CRASH), (), {"IGC_CRASH_CONTROL": 1}, (), {}, needs_intel_gpu=True)
    crash, fine = (capture_spirv(p, timeout_s=TIMEOUT_S) for p in (plan, control))
    reports = compile_isa_all([IsaJob(c.images[0], c.modules[0], "bmg") for c in (crash, fine)],
                              timeout_s=TIMEOUT_S)
    assert reports[0].verdict is Verdict.CRASHED, reports[0].text()
    assert reports[1].verdict is Verdict.COMPILED, reports[1].text()
