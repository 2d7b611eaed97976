"""Validation of the xmx families against stated device limits (no device needed, except the
SPIR-V comparison at the end: a real build on opencl:cpu).

B580 below is stated here rather than read from the catalog, so these tests pin the rules
against the figures of docs/xe2-facts.md: an Intel GPU with subgroups of 16 and 32,
1024 work-items per work-group, 128 KiB of local memory, 128 or 256 registers of 64 bytes per
thread (512 work-items per work-group with 256), and an 8 x 16 x 16 matrix engine.
"""

from __future__ import annotations

import dataclasses

import pytest

from xe2tune.errors import InvalidProblem
from xe2tune.kernels import DeviceCaps, ProblemSpec
from xe2tune.kernels._baselines import ONEDNN, SEED_SAGEV1, SYCLTLA
from xe2tune.kernels._spirv import DOUBLE_GRF
from xe2tune.kernels._spirv_capture import capture_spirv
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily

B580 = DeviceCaps(
    name="B580 (stated)", backend="level_zero", device_type="gpu", max_work_group_size=1024,
    sub_group_sizes=(16, 32), local_mem_bytes=128 * 1024, compute_units=160,
    global_mem_bytes=12 << 30, has_matrix_engine=True, is_intel_gpu=True,
    registers_per_thread=(128, 256), register_bytes=64, max_work_items_large_grf=512,
    matrix_shape=(8, 16, 16),
)
# The OpenCL CPU runtime as a process started with CL_CONFIG_CPU_VECTORIZER_MODE=0 sees it.
CPU = DeviceCaps(
    name="Intel OpenCL CPU (stated)", backend="opencl", device_type="cpu",
    max_work_group_size=8192, sub_group_sizes=(4, 8, 16, 32, 64), local_mem_bytes=256 * 1024,
    compute_units=2, global_mem_bytes=8 << 30,
)
PREFILL = XmxPrefillFamily()
DECODE = XmxDecodeFamily()


def prefill(d=128, dtype="fp16", **kw):
    return ProblemSpec("prefill", d, dtype, kw.pop("q_len", 512), kw.pop("kv_len", 512), **kw)


def decode(d=128, dtype="fp16", **kw):
    return ProblemSpec("decode", d, dtype, kw.pop("q_len", 1), kw.pop("kv_len", 4096),
                       heads_q=32, heads_kv=8, **kw)


def cfg(family, problem, **params):
    base = dict(bq=128, bk=64, bd=32, bv=32, sg_q=8, sg_k=1, stages=2, grf=256)
    if family is DECODE:
        base.update(bq=8, sg_q=1, kv_chunk=1024)
    return family.config_from_params(problem, {**base, **params})


# --- the seeded baselines ----------------------------------------------------------------------
VALID_BASELINES = [
    # seed 000 SageV1: ShapeQK (256, 64, 32), ShapePV (256, 32, 64), 16 x 1, 2 stages, VTiles 4
    ("sage-v1", PREFILL, prefill(128), dict(bq=256, bk=64, bd=32, bv=32, sg_q=16)),
    # SYCL*TLA BMG examples
    ("tla-64", PREFILL, prefill(64), dict(bq=128, bk=64, bd=32, bv=32, sg_q=8)),
    ("tla-96", PREFILL, prefill(96), dict(bq=128, bk=64, bd=32, bv=32, sg_q=8)),
    ("tla-128", PREFILL, prefill(128), dict(bq=256, bk=32, bd=32, bv=32, sg_q=16)),
    ("tla-192", PREFILL, prefill(192), dict(bq=256, bk=64, bd=32, bv=32, sg_q=32)),
    ("tla-decode-128", DECODE, decode(128), dict(bq=8, bk=512, bd=64, bv=32, sg_k=8, stages=1)),
    ("tla-decode-256", DECODE, decode(256), dict(bq=8, bk=512, bd=64, bv=32, sg_k=8, stages=1)),
    # oneDNN decode hd64: 16 rows, 512 keys over 8 subgroups
    ("onednn-decode-64", DECODE, decode(64), dict(bq=16, bk=512, sg_k=8, stages=1)),
]


@pytest.mark.parametrize("name,family,problem,params", VALID_BASELINES,
                         ids=[b[0] for b in VALID_BASELINES])
def test_baselines_are_valid_on_b580(name, family, problem, params):
    config = cfg(family, problem, **params)
    assert family.invalid_reason(config, problem, B580) is None
    assert config.vtiles == problem.head_dim // config.bv


def test_sage_v1_is_the_hd128_default_and_its_figures():
    problem = prefill(128)
    config = PREFILL.default_config(problem, B580)
    assert (config.shape_qk, config.shape_pv, config.shape_out) == (
        (256, 64, 32), (256, 32, 64), (256, 128))
    assert (config.subgroup_layout, config.stages, config.vtiles) == ((16, 1), 2, 4)
    assert config.knob("grf") == 256 and config.family == "sdpa_xmx_prefill"
    # Q 16x32 fp16 (16) + S 16x64 fp32 (64) + P (32) + O 16x128 fp32 (128) registers, 2 x 2
    # for the row state of its 2 row fragments, 12 reserved: the whole register file
    assert PREFILL.register_footprint(config, problem) == 256
    # 2 row fragments x 4 key fragments x (128 + 128) / 16
    assert PREFILL.expected_matrix_mads(config, problem) == 128


ONEDNN_PREFILL = [
    # (head dim, BQ, BK, sg_q, sg_k, footprint): O [BQ / sg_q, D] fp32 alone is >= 256 registers
    (64, 128, 128, 2, 8, 444),
    (128, 128, 256, 2, 16, 700),
    (256, 128, 128, 4, 8, 612),
]


@pytest.mark.parametrize("d,bq,bk,sg_q,sg_k,regs", ONEDNN_PREFILL)
def test_onednn_prefill_layouts_exceed_the_register_file(d, bq, bk, sg_q, sg_k, regs):
    problem = prefill(d)
    config = cfg(PREFILL, problem, bq=bq, bk=bk, sg_q=sg_q, sg_k=sg_k)
    assert PREFILL.register_footprint(config, problem) == regs
    assert f"register footprint {regs}" in PREFILL.invalid_reason(config, problem, B580)


def test_every_published_baseline_is_reported_with_its_validity():
    labels = {b.label for b in PREFILL.baselines(prefill(128), B580)}
    assert labels == {SEED_SAGEV1, SYCLTLA, ONEDNN}
    assert PREFILL.baselines(prefill(128, "fp32"), B580) == ()
    for d in (64, 128, 192, 256):
        assert DECODE.baselines(decode(d), B580)
    assert DECODE.baselines(decode(96), B580) == ()  # SYCL*TLA's BD 64 does not slice 96


# --- known-invalid configs -------------------------------------------------------------------
INVALID = [
    ("rows-per-subgroup", prefill(128), dict(bq=96, sg_q=8), "multiple of 8"),
    ("key-share", prefill(128), dict(bk=64, sg_k=8), "keys per subgroup BK / sg_k = 64 / 8"),
    ("bd", prefill(96), dict(bd=64), "BD 64 must divide the head dim 96"),
    ("bv-fragment", prefill(128), dict(bv=8), "BV 8 must be a multiple of 16"),
    ("33-subgroups", prefill(64), dict(bq=264, sg_q=33), "at most 32 subgroups"),
    ("over-max-work-group", prefill(64), dict(bq=512, bk=64, sg_q=32, sg_k=4, grf=128),
     "exceeds the device maximum 1024"),
    ("registers-128", prefill(128), dict(bq=128, sg_q=8, grf=128),
     "register footprint 256 (a subgroup's Q, S, P, O fragments, row state and 12 reserved) "
     "exceeds grf 128"),
    ("grf-value", prefill(128), dict(grf=192), "grf must be 128 or 256"),
]


@pytest.mark.parametrize("name,problem,params,reason", INVALID, ids=[i[0] for i in INVALID])
def test_known_invalid_configs_are_rejected_with_their_reason(name, problem, params, reason):
    config = cfg(PREFILL, problem, **params)
    assert reason in (PREFILL.invalid_reason(config, problem, B580) or "")


def test_grf_256_needs_a_device_that_offers_it():
    problem = prefill(64, q_len=64, kv_len=64)
    config = cfg(PREFILL, problem, bq=16, sg_q=2, grf=256)
    assert "grf 256 is an Intel GPU register-file mode" in PREFILL.invalid_reason(
        config, problem, CPU)
    only_128 = dataclasses.replace(B580, registers_per_thread=(128,))
    assert "grf 256 is not offered" in PREFILL.invalid_reason(config, problem, only_128)
    assert PREFILL.invalid_reason(cfg(PREFILL, problem, bq=16, sg_q=2, grf=128), problem,
                                  CPU) is None


def test_register_rule_applies_only_with_a_register_file_model():
    problem = prefill(256)
    config = cfg(PREFILL, problem, bq=64, bk=64, sg_q=2, sg_k=1, grf=128)
    assert PREFILL.register_footprint(config, problem) > 128
    assert "register footprint" in PREFILL.invalid_reason(config, problem, B580)
    assert PREFILL.invalid_reason(config, problem, CPU) is None


def test_decode_kv_chunk_is_a_multiple_of_bk():
    problem = decode(128)
    config = cfg(DECODE, problem, bk=512, sg_k=8, kv_chunk=768)
    assert "kv_chunk 768 must be a positive multiple of BK 512" in DECODE.invalid_reason(
        config, problem, B580)


# --- problems and devices the family cannot serve ----------------------------------------------
def test_fp32_is_not_served():
    problem = prefill(128, "fp32")
    reason = PREFILL.unavailable_reason(problem, B580)
    assert reason == "sdpa_xmx_prefill serves fp16/bf16, not fp32"
    with pytest.raises(InvalidProblem, match="fp16/bf16, not fp32"):
        PREFILL.parameter_space(problem)
    with pytest.raises(InvalidProblem, match="fp16/bf16, not fp32"):
        DECODE.default_config(decode(64, "fp32"), B580)
    assert PREFILL.invalid_reason(cfg(PREFILL, prefill(128), bq=256, sg_q=16), problem,
                                  B580) == reason


def test_cpu_runtime_in_vectorizer_mode_1_says_how_to_start():
    mode1 = dataclasses.replace(CPU, required_subgroup_size_ok=False)
    reason = PREFILL.unavailable_reason(prefill(64), mode1)
    assert "CL_CONFIG_CPU_VECTORIZER_MODE=0" in reason
    no16 = dataclasses.replace(CPU, sub_group_sizes=(4, 8))
    assert "subgroups of 16" in DECODE.unavailable_reason(decode(64), no16)


def test_wrong_mode_and_wrong_family():
    assert "serves mode prefill" in PREFILL.unavailable_reason(decode(64), B580)
    config = dataclasses.replace(cfg(PREFILL, prefill(64)), family="sdpa_prefill")
    assert "belongs to family sdpa_prefill" in PREFILL.invalid_reason(config, prefill(64), B580)


# --- defaults, spaces, defines -----------------------------------------------------------------
@pytest.mark.parametrize("caps", [B580, CPU], ids=["b580", "cpu"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 96, 128, 192, 256])
def test_defaults_are_valid(caps, dtype, d):
    for problem in (prefill(d, dtype), prefill(d, dtype, q_len=17, kv_len=1),
                    decode(d, dtype), decode(d, dtype, q_len=16, kv_len=1)):
        family = PREFILL if problem.mode == "prefill" else DECODE
        config = family.default_config(problem, caps)
        assert family.invalid_reason(config, problem, caps) is None, (problem, str(config))


def test_local_memory_is_checked_against_the_device():
    # SageV1 stages Q [256, 128] fp16: 64 KiB, exactly what a 64 KiB device offers (on the
    # B580's 128 KiB the register file always binds first).
    problem = prefill(128)
    config = cfg(PREFILL, problem, bq=256, sg_q=16)
    assert PREFILL.invalid_reason(config, problem, dataclasses.replace(
        B580, local_mem_bytes=65536)) is None
    assert PREFILL.invalid_reason(config, problem, dataclasses.replace(
        B580, local_mem_bytes=65535)) == "local memory 65536 B exceeds the device's 65535 B"


def test_params_round_trip_and_space_has_valid_configs():
    problem = decode(128, q_len=5)
    space = DECODE.parameter_space(problem)
    params = {name: values[0] for name, values in space.items()}
    assert DECODE.params_from_config(DECODE.config_from_params(problem, params)) == params
    assert next(PREFILL.valid_configs(prefill(128), B580), None) is not None


def test_defines_pick_the_policy_and_emit_grf_only_for_intel_gpus():
    problem = prefill(128)
    config = cfg(PREFILL, problem, bq=256, sg_q=16)
    gpu = PREFILL.plan(config, problem, B580).defines
    assert gpu["POLICY"] == 1 and gpu["GRF"] == 256 and gpu["VTILES"] == 4
    small = cfg(PREFILL, problem, bq=16, sg_q=2, grf=128)
    cpu = PREFILL.plan(small, problem, CPU).defines
    assert cpu["POLICY"] == 0 and "GRF" not in cpu
    a770_like = dataclasses.replace(B580, matrix_shape=(8, 8, 16))
    assert PREFILL.defines(config, problem, a770_like)["POLICY"] == 0
    # A CPU whose runtime exposes a matrix engine (AMX) of the same shape still emulates: the
    # native built-ins exist only in Intel's GPU compiler.
    amx_like = dataclasses.replace(CPU, has_matrix_engine=True, matrix_shape=(8, 16, 16))
    assert PREFILL.defines(small, problem, amx_like)["POLICY"] == 0
    assert PREFILL.plan(config, problem, B580).needs_intel_gpu
    assert not PREFILL.plan(small, problem, CPU).needs_intel_gpu


def test_decode_plan_scratch_and_launches():
    problem = decode(128, q_len=5, kv_len=1000)  # 5 x 4 = 20 rows -> 3 tiles of 8
    config = cfg(DECODE, problem, bq=8, bk=64, sg_k=2, kv_chunk=256, grf=128)
    plan = DECODE.plan(config, problem, CPU)
    split, combine = plan.launches
    assert split.global_size == (8, 3 * 4 * 32) and split.local_size == (1, 32)
    assert combine.global_size == (8 * 20, 128)
    assert plan.scratch == {"part_o": 4 * 8 * 4 * 24 * 128, "part_ml": 8 * 8 * 4 * 24}


# --- the C++ agrees with the Python model ------------------------------------------------------
SPIRV_CASES = [
    # SageV1: 2 row x 4 key fragments x (128 + 128) / 16; Q 64 KiB; doubleGRF
    (PREFILL, prefill(128), dict(bq=256, bk=64, bd=32, bv=32, sg_q=16), 128, 65536),
    # 8 key-split subgroups: (m, l) rows next to Q [8, 128]
    (DECODE, decode(128), dict(bq=8, bk=512, bd=64, bv=32, sg_k=8, stages=1), 64, 2112),
]


@pytest.mark.requires_xpu
@pytest.mark.parametrize("family,problem,params,mads,local", SPIRV_CASES,
                         ids=["sage-v1", "tla-decode"])
def test_native_spirv_matches_the_model(family, problem, params, mads, local):
    """The native build's SPIR-V holds the modelled DPAS calls and local memory."""
    config = cfg(family, problem, **params)
    assert family.expected_matrix_mads(config, problem) == mads
    assert family.local_memory_bytes(config, problem, B580) == local
    summary = capture_spirv(family.plan(config, problem, B580), timeout_s=600).summary_dict()
    assert summary["matrix_mads"] == mads
    assert summary["local_memory_bytes"] == local
    assert summary["subgroup_sizes"] == [16]
    assert DOUBLE_GRF in summary["register_modes"]  # grf 256 on an Intel GPU: grf_size<256>
