"""Latent attention (Dv != D) and FP8 K/V in the vector-lane families on the real opencl:cpu
device, against the float64 reference (of the dequantized K/V for FP8), and through
``xe2tune.sdpa``.

Tolerances: those of Q/O's dtype (kernels/_tolerance.py): the reference takes the FP8 values
the kernel is given, exactly dequantized, so what remains is the kernel's fp32 arithmetic and
the output's rounding; the quantization error of FP8 itself is the caller's choice and not
the kernel's. Each build (family, config, defines) serves several problems; shapes are small.
The xmx family's latent and FP8 cases run in tests/kernels/test_xmx_correctness.py (its emulated
built-ins need a process of their own).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xe2tune
from xe2tune.errors import InvalidProblem
from xe2tune.harness import BenchSettings, ConfigRunner, MeasureRequest, PlanExecutor
from xe2tune.kernels import (
    ProblemSpec,
    build_program,
    catalog_device,
    check_output,
    families_for,
    make_inputs,
    reference_sdpa,
)
from xe2tune.kernels._decode import DecodeFamily
from xe2tune.kernels._prefill import PrefillFamily
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily
from xe2tune.measurement import TrialStatus

pytestmark = pytest.mark.requires_xpu

PREFILL, DECODE = PrefillFamily(), DecodeFamily()


def P(mode, d, dtype, q_len, kv_len, hq, hkv, causal=False, batch=1, dv=None, kv=None):  # noqa: N802
    return ProblemSpec(mode, d, dtype, q_len, kv_len, heads_q=hq, heads_kv=hkv, batch=batch,
                       causal=causal, head_dim_v=dv, kv_dtype=kv)


# K/V staged in local memory (kv_stage), packed once (kv_pack), read in place: each K/V loader
# path of the mainloop.
STAGED = dict(bq=32, bk=32, bd=16, bv=16, stages=1, subgroup_size=8, rows_per_item=4,
              kv_stage=True, kv_pack=False)
PACKED = {**STAGED, "kv_pack": True}
IN_PLACE = {**STAGED, "kv_stage": False, "bk": 16}
DECODE_IN_PLACE = dict(bq=8, bk=16, bd=32, bv=32, stages=1, subgroup_size=16, rows_per_item=4,
                       kv_stage=False, kv_chunk=128, kv_heads_per_group=1)
DECODE_STAGED = {**DECODE_IN_PLACE, "kv_stage": True, "kv_heads_per_group": 2}

# (label, family, params or None for the default, problems sharing one build)
BUILDS = [
    ("mla-prefill-default-fp16", PREFILL, None,
     [P("prefill", 192, "fp16", 129, 301, 8, 2, causal=True, dv=128),
      P("prefill", 192, "fp16", 17, 40, 4, 4, batch=2, dv=128)]),
    ("mla-prefill-staged-bf16", PREFILL, STAGED,
     [P("prefill", 192, "bf16", 77, 129, 4, 1, causal=True, dv=128)]),
    ("mla-prefill-packed-fp32", PREFILL, PACKED,
     [P("prefill", 192, "fp32", 40, 77, 4, 2, causal=True, dv=128)]),
    ("mla-decode-default-bf16", DECODE, None,
     [P("decode", 576, "bf16", 1, 1000, 16, 1, dv=512)]),
    ("mla-decode-128heads-fp16", DECODE, None,
     [P("decode", 576, "fp16", 1, 129, 128, 1, dv=512)]),
    ("mla-decode-staged-fp16", DECODE, {**DECODE_STAGED, "kv_heads_per_group": 1},
     [P("decode", 576, "fp16", 2, 301, 16, 1, causal=True, dv=512)]),
    ("fp8-prefill-default-e4m3-fp16", PREFILL, None,
     [P("prefill", 128, "fp16", 129, 301, 8, 2, causal=True, kv="e4m3"),
      P("prefill", 128, "fp16", 17, 40, 4, 4, kv="e4m3")]),
    ("fp8-prefill-in-place-e5m2-bf16", PREFILL, IN_PLACE,
     [P("prefill", 64, "bf16", 77, 129, 4, 1, causal=True, batch=2, kv="e5m2")]),
    ("fp8-prefill-packed-e4m3-bf16", PREFILL, PACKED,
     [P("prefill", 64, "bf16", 40, 77, 8, 2, kv="e4m3")]),
    ("fp8-decode-default-e4m3-bf16", DECODE, None,
     [P("decode", 128, "bf16", 1, 1000, 32, 8, kv="e4m3"),
      P("decode", 128, "bf16", 5, 129, 8, 2, causal=True, kv="e4m3")]),
    ("fp8-decode-staged-e5m2-fp16", DECODE, DECODE_STAGED,
     [P("decode", 64, "fp16", 2, 300, 8, 2, kv="e5m2")]),
    ("fp8-mla-decode-e4m3-fp16", DECODE, None,
     [P("decode", 576, "fp16", 1, 1000, 16, 1, dv=512, kv="e4m3")]),
]
CASES = [pytest.param(family, params, problem, id=f"{label}:{i}")
         for label, family, params, problems in BUILDS for i, problem in enumerate(problems)]
SEEDS = {problem.key(): seed for seed, (_, _, _, problems) in enumerate(BUILDS)
         for problem in problems}


@pytest.mark.parametrize("family,params,problem", CASES)
def test_variant_matches_reference(cpu_queue, cpu_caps, family, params, problem):
    config = (family.default_config(problem, cpu_caps) if params is None
              else family.config_from_params(problem, params))
    plan = family.plan(config, problem, cpu_caps)
    built = build_program(cpu_queue, plan.source_file, plan.kernel_names, plan.defines)
    executor = PlanExecutor(cpu_queue, built, plan, problem)
    inputs = make_inputs(problem, seed=SEEDS[problem.key()])
    if problem.kv_dtype is not None:  # per-KV-head scales, all different
        assert len(inputs) == 4 and len(set(inputs[3].ravel())) == inputs[3].size
    buffers = executor.allocate(*inputs)
    executor.launch_and_wait(buffers)
    report = check_output(problem, executor.read_output(buffers), reference_sdpa(problem, *inputs))
    assert report.passed, (str(config), report)


@pytest.mark.parametrize("problem", [
    P("decode", 576, "bf16", 1, 300, 16, 1, dv=512, kv="e5m2"),
    P("prefill", 192, "fp16", 40, 77, 4, 2, causal=True, dv=128),
], ids=["fp8-mla-decode", "mla-prefill"])
def test_the_harness_verifies_and_times_variants_as_any_trial(cpu_queue, cpu_caps, problem):
    """What search, bench and workers run: inputs (FP8 scales included), verification against
    the reference, timing, through the harness's ConfigRunner."""
    runner = ConfigRunner(cpu_queue, cpu_caps, None, BenchSettings(warmup=1, iterations=3,
                                                                     time_budget_s=0.5))
    family = DECODE if problem.mode == "decode" else PREFILL
    result = runner.measure(MeasureRequest(family, problem, family.default_config(problem,
                                                                                  cpu_caps)))
    assert result.status is TrialStatus.OK and result.correctness.passed, result
    assert len(result.timing.samples) >= 3


def test_sdpa_takes_latent_v_and_fp8_kv_with_per_tensor_and_per_head_scales(cpu_queue):
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 16, 576)).astype(np.float16)
    k = rng.standard_normal((300, 1, 576)).astype(ml_dtypes.float8_e4m3fn)
    v = rng.standard_normal((300, 1, 512)).astype(ml_dtypes.float8_e4m3fn)
    problem = ProblemSpec("decode", 576, "fp16", 1, 300, heads_q=16, heads_kv=1, kv_dtype="e4m3")
    out = xe2tune.sdpa(q, k, v, k_scale=0.5, v_scale=2.0, config="default", device=cpu_queue)
    scales = np.array([[0.5], [2.0]], dtype=np.float32)
    assert out.shape == (1, 16, 512) and out.dtype == np.float16
    ref = reference_sdpa(problem, q[None], k[None], v[None], scales)
    assert check_output(problem, out[None], ref).passed

    q = rng.standard_normal((2, 40, 4, 64)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((2, 77, 2, 64)).astype(ml_dtypes.float8_e5m2)
    v = rng.standard_normal((2, 77, 2, 64)).astype(ml_dtypes.float8_e5m2)
    problem = ProblemSpec("prefill", 64, "bf16", 40, 77, heads_q=4, heads_kv=2, batch=2,
                          causal=True, kv_dtype="e5m2")
    per_head = np.array([0.75, 1.5], dtype=np.float32)
    out = xe2tune.sdpa(q, k, v, causal=True, k_scale=per_head, v_scale=per_head[::-1],
                       config="default", device=cpu_queue)
    ref = reference_sdpa(problem, q, k, v, np.stack([per_head, per_head[::-1]]))
    assert check_output(problem, out, ref).passed


def test_sdpa_takes_v_with_its_own_head_dim(cpu_queue):
    problem = P("prefill", 192, "fp16", 40, 77, 4, 2, causal=True, dv=128)
    q, k, v = make_inputs(problem, seed=9)
    out = xe2tune.sdpa(q, k, v, causal=True, config="default", device=cpu_queue)
    assert out.shape == (1, 40, 4, 128)
    assert check_output(problem, out, reference_sdpa(problem, q, k, v)).passed


@pytest.mark.parametrize("kwargs,arrays,message", [
    ({"k_scale": 2.0}, ("fp16", "fp16"), "leave them at 1"),
    ({"k_scale": np.ones(3)}, ("fp16", "e4m3"), r"one value per KV head \(2\)"),
    ({"v_scale": float("nan")}, ("fp16", "e4m3"), "v_scale must be finite"),
    ({}, ("fp32", "e4m3"), "needs dtype fp16 or bf16"),
    ({}, ("fp16", "mixed"), "k and v must share q's dtype"),
])
def test_sdpa_refuses_bad_fp8_inputs_in_one_line(cpu_queue, kwargs, arrays, message):
    dtypes = {"fp16": np.float16, "fp32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn}
    q = np.ones((1, 4, 64), dtype=dtypes[arrays[0]])
    k = np.ones((8, 2, 64), dtype=dtypes.get(arrays[1], ml_dtypes.float8_e4m3fn))
    v = k.astype(ml_dtypes.float8_e5m2) if arrays[1] == "mixed" else k
    with pytest.raises(InvalidProblem, match=message) as info:
        xe2tune.sdpa(q, k, v, device=cpu_queue, **kwargs)
    assert "\n" not in str(info.value)


def test_xmx_prefill_refuses_a_wider_v_with_one_reason():
    b580 = catalog_device("b580").caps
    wide_v = P("prefill", 128, "fp16", 64, 64, 8, 8, dv=256)
    with pytest.raises(InvalidProblem, match="needs Dv <= D"):
        XmxPrefillFamily().default_config(wide_v, b580)
    # ... and the search falls back to the vector-lane family for it
    assert [f.name for f in families_for(wide_v, b580)] == ["sdpa_prefill"]


def test_xmx_latent_decode_splits_v_columns_where_o_would_fill_the_registers():
    """Absorbed MLA decode (Dv 512) on Xe2: an 8-row O fragment of all 512 columns alone takes
    the 256 registers, so the default splits V's columns among work-groups; a config that keeps
    them whole, or names dv_splits for a problem without the knob, is refused with the reason."""
    b580 = catalog_device("b580").caps
    family = XmxDecodeFamily()
    latent_decode = P("decode", 576, "bf16", 1, 4096, 16, 1)
    default = family.default_config(latent_decode, b580)
    assert default.knob("dv_splits") == 2 and family.dv_columns(default, latent_decode) == 256
    params = family.params_from_config(default)
    whole = family.config_from_params(latent_decode, {**params, "dv_splits": 1})
    assert "register footprint" in family.invalid_reason(whole, latent_decode, b580)
    missing = family.config_from_params(latent_decode, {
        k: v for k, v in params.items() if k != "dv_splits"})
    assert family.invalid_reason(missing, latent_decode, b580) == (
        "dv_splits absent: sdpa_xmx_decode takes one of 1, 2, 4 for Dv 512")
    mha = P("decode", 128, "fp16", 1, 4096, 32, 8)
    split_mha = family.config_from_params(mha, {
        **family.params_from_config(family.default_config(mha, b580)), "dv_splits": 2})
    assert family.invalid_reason(split_mha, mha, b580) == (
        "dv_splits 2: sdpa_xmx_decode takes none for Dv 128")
    assert "dv_splits" in family.parameter_space(latent_decode)
    assert "dv_splits" not in family.parameter_space(mha)
    # the matrix engine serves it on an Xe2 device, as it does MHA decode
    assert [f.name for f in families_for(latent_decode, b580)] == ["sdpa_xmx_decode"]


@pytest.mark.parametrize("q_len", [1, 17], ids=["decode", "prefill"])
@pytest.mark.parametrize("fp8", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_every_finite_fp8_bit_pattern_of_v_reads_as_its_value(cpu_queue, q_len, fp8):
    # One key: its softmax weight is exactly 1, so every output row is V's row itself, and every
    # finite FP8 value is exact in fp16 (O's type) and in the fp32 arithmetic between: the
    # loaders' bit conversions (kernels/sdpa_fp8.hpp) are checked value for value, signs,
    # subnormals and the largest values included. Two KV heads: the decode takes its
    # several-heads path.
    bits = np.arange(256, dtype=np.uint8)
    finite = bits[np.isfinite(bits.view(fp8).astype(np.float32))]
    row = np.zeros(256, dtype=np.uint8)
    row[:finite.size] = finite
    v = np.stack([row, row[::-1]])[None].view(fp8)  # [kv_len 1, heads_kv 2, 256]
    k = np.ones((1, 2, 256), dtype=fp8)
    q = np.ones((q_len, 4, 256), dtype=np.float16)
    out = xe2tune.sdpa(q, k, v, config="default", device=cpu_queue)
    # query heads 2h and 2h + 1 read KV head h, every query position the same row
    expected = np.broadcast_to(np.repeat(v.astype(np.float32), 2, axis=1), out.shape)
    np.testing.assert_array_equal(out.astype(np.float32), expected)
