"""Config validation, config mapping, the reference and the output check: no device needed,
except for the two tests proving that the C++ static_asserts reject what invalid_reason rejects.
"""

from __future__ import annotations

import dataclasses
import random
import re
import secrets
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import CPU_CAPS

import xe2tune
from xe2tune.errors import InvalidConfig, InvalidProblem, KernelCompileError
from xe2tune.kernels import (
    HEAD_DIMS,
    LauncherConfig,
    ProblemSpec,
    build_program,
    check_output,
    family_for_mode,
    family_names,
    get_family,
    make_inputs,
    reference_sdpa,
)
from xe2tune.kernels._jit import KERNEL_DIR, SYCL_HEADERS, _sycl_preamble


def P(mode="prefill", d=128, dtype="fp16", q_len=129, kv_len=1000, hq=8, hkv=2,  # noqa: N802
      causal=False):
    return ProblemSpec(mode, d, dtype, q_len, kv_len, heads_q=hq, heads_kv=hkv, causal=causal)


PREFILL = dict(bq=64, bk=16, bd=16, bv=16, stages=1, subgroup_size=8, rows_per_item=8,
               kv_stage=True)
DECODE = dict(PREFILL, bq=4, rows_per_item=4, kv_stage=False, kv_chunk=512, kv_heads_per_group=1)


@pytest.mark.parametrize("mode", ["prefill", "decode"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("q_len, group", [(1, 1), (16, 8), (1000, 4)])
def test_default_config_is_valid_everywhere(mode, dtype, head_dim, q_len, group):
    if mode == "decode" and q_len > 16:
        q_len = 7
    problem = P(mode, head_dim, dtype, q_len, 1000, hq=8 * group, hkv=8)
    family = family_for_mode(mode)
    config = family.default_config(problem, CPU_CAPS)
    assert family.invalid_reason(config, problem, CPU_CAPS) is None
    assert family.plan(config, problem, CPU_CAPS).launches


@pytest.mark.parametrize("simd, lanes, expected", [
    ((8, 16), 8, 16), ((8, 16), 16, 8), ((8, 16), 4, 16), ((16, 32), 16, 32), ((16, 32), 8, 32),
])
def test_vector_registers_count_registers_not_lanes(simd, lanes, expected):
    caps = dataclasses.replace(CPU_CAPS, simd_width=simd[0], simd_registers=simd[1])
    assert caps.vector_registers(lanes) == expected
    problem = P("prefill", 128, "fp16")
    family = family_for_mode("prefill")
    config = family.config_from_params(problem, {**PREFILL, "subgroup_size": lanes})
    assert family.defines(config, problem, caps)["VREGS"] == expected


@pytest.mark.parametrize("width", [8, 16])
@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_default_follows_the_simd_width(mode, width):
    caps = dataclasses.replace(CPU_CAPS, simd_width=width, simd_registers=2 * width)
    problem = P(mode, 128, "fp16", q_len=1 if mode == "decode" else 1000, hq=32, hkv=8)
    config = family_for_mode(mode).default_config(problem, caps)
    assert config.subgroup_size == width


def _with(caps=CPU_CAPS, **changes):
    return dataclasses.replace(caps, **changes)


INVALID = [
    # (mode, head dim, parameter changes, caps, words the reason must contain)
    ("prefill", 96, dict(bd=64), CPU_CAPS, "BD 64 must divide the head dim 96"),
    ("prefill", 128, dict(bk=8, subgroup_size=16, bd=16, bv=16), CPU_CAPS, "must divide BK 8"),
    ("prefill", 128, dict(subgroup_size=32, bk=32, bd=32, bv=32), CPU_CAPS, "vector width"),
    ("prefill", 128, dict(subgroup_size=4, bk=8, bd=8, bv=8), _with(sub_group_sizes=(8, 16)),
     "not supported by the device"),
    ("prefill", 96, dict(bv=64), CPU_CAPS, "BV 64 must divide the V head dim 96"),
    ("prefill", 128, dict(bd=8, subgroup_size=16, bk=16, bv=16), CPU_CAPS, "must divide BD 8"),
    ("prefill", 128, dict(bv=8, subgroup_size=16), CPU_CAPS, "must divide BV 8"),
    ("prefill", 128, dict(bq=8, rows_per_item=3), CPU_CAPS, "rows_per_item 3 must divide BQ 8"),
    ("prefill", 128, dict(bq=128, rows_per_item=1), _with(max_work_group_size=64),
     "exceeds the device maximum 64"),
    ("prefill", 256, dict(bk=64), _with(local_mem_bytes=64 * 1024), "local memory"),
    ("prefill", 128, {}, _with(has_fp16=False), "no fp16"),
    ("prefill", 128, dict(kv_pack=True, kv_stage=False), CPU_CAPS, "it needs kv_stage"),
    ("decode", 128, dict(kv_chunk=100), CPU_CAPS, "kv_chunk 100 must be a positive multiple"),
    ("decode", 128, dict(kv_heads_per_group=4), CPU_CAPS,
     "kv_heads_per_group 4 must be a positive divisor of heads_kv 2"),
]


@pytest.mark.parametrize("mode, head_dim, changes, caps, reason", INVALID,
                         ids=[case[-1] for case in INVALID])
def test_invalid_configs_are_rejected_before_building(mode, head_dim, changes, caps, reason):
    problem = P(mode, head_dim, q_len=1 if mode == "decode" else 129)
    family = family_for_mode(mode)
    params = {**(PREFILL if mode == "prefill" else DECODE), **changes}
    config = family.config_from_params(problem, params)
    got = family.invalid_reason(config, problem, caps)
    assert got is not None and reason in got
    with pytest.raises(InvalidConfig, match=reason):
        family.plan(config, problem, caps)


def test_hand_made_config_inconsistent_with_the_vocabulary():
    problem = P()
    family = family_for_mode("prefill")
    good = family.config_from_params(problem, PREFILL)
    bad_pv = dataclasses.replace(good, shape_pv=(64, 16, 32))
    assert "shape_pv must be (BQ, BV, BK)" in family.invalid_reason(bad_pv, problem, CPU_CAPS)
    bad_out = dataclasses.replace(good, shape_out=(64, 64))
    assert "shape_out must be (BQ, Dv)" in family.invalid_reason(bad_out, problem, CPU_CAPS)
    bad_layout = dataclasses.replace(good, subgroup_layout=(4, 2))
    assert "subgroup_layout must be" in family.invalid_reason(bad_layout, problem, CPU_CAPS)
    no_knobs = dataclasses.replace(good, knobs=())
    assert "knobs" in family.invalid_reason(no_knobs, problem, CPU_CAPS)
    assert "serves mode prefill" in family.invalid_reason(good, P("decode", q_len=1), CPU_CAPS)


def test_configs_stored_before_kv_pack_existed_read_as_unpacked():
    problem = P()
    family = family_for_mode("prefill")
    packed = family.config_from_params(problem, {**PREFILL, "kv_pack": True})
    old = dataclasses.replace(
        packed, knobs=tuple(kv for kv in packed.knobs if kv[0] != "kv_pack"))
    assert family.invalid_reason(old, problem, CPU_CAPS) is None
    assert family.params_from_config(old) == {**PREFILL, "kv_pack": False}
    assert family.defines(old, problem, CPU_CAPS)["KV_STAGE"] == 1
    assert family.defines(packed, problem, CPU_CAPS)["KV_STAGE"] == 2
    plan = family.plan(packed, problem, CPU_CAPS)
    assert [launch.kernel for launch in plan.launches] == ["xe2t_sdpa_pack_kv",
                                                          "xe2t_sdpa_prefill"]
    # fp32 K^T and V of all 63 blocks of 16 keys (kv 1000) of both KV heads
    assert plan.scratch["tiles"] == 4 * 2 * 63 * 16 * (128 + 128)
    with pytest.raises(InvalidConfig, match="unknown"):
        family_for_mode("decode").config_from_params(P("decode", q_len=1),
                                                     {**DECODE, "kv_pack": True})


def test_bad_parameters_raise_invalid_config():
    family = family_for_mode("decode")
    with pytest.raises(InvalidConfig, match="missing"):
        family.config_from_params(P("decode", q_len=1), {"bq": 4})
    with pytest.raises(InvalidConfig, match="integers"):
        family.config_from_params(P("decode", q_len=1), {**DECODE, "bk": "x"})
    with pytest.raises(InvalidProblem, match="serves mode decode"):
        family.parameter_space(P("prefill"))


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_params_config_round_trip_over_a_sample(mode):
    problem = P(mode, 64, q_len=3 if mode == "decode" else 129)
    family = family_for_mode(mode)
    space = family.parameter_space(problem)
    rng = random.Random(0)
    valid = 0
    for _ in range(300):
        params = {name: rng.choice(list(values)) for name, values in space.items()}
        config = family.config_from_params(problem, params)
        assert family.params_from_config(config) == params
        assert LauncherConfig.from_dict(config.to_dict()) == config
        if family.invalid_reason(config, problem, CPU_CAPS) is None:
            valid += 1
            plan = family.plan(config, problem, CPU_CAPS)
            assert plan.defines["VTILES"] * plan.defines["BV"] == 64
    assert valid > 0


def test_negative_stages_are_refused_when_the_config_is_made():
    problem = P()
    with pytest.raises(InvalidConfig, match="stages must be an integer in 0"):
        family_for_mode("prefill").config_from_params(problem, {**PREFILL, "stages": -1})


def test_registry():
    assert set(family_names()) == {"sdpa_xmx_prefill", "sdpa_xmx_decode", "sdpa_prefill",
                                   "sdpa_decode"}
    assert get_family("sdpa_decode").mode == "decode"
    with pytest.raises(InvalidConfig, match="accepted: sdpa_xmx_prefill, sdpa_xmx_decode"):
        get_family("nope")
    with pytest.raises(InvalidConfig, match="no kernel family serves mode"):
        family_for_mode("training")


# The C++ side rejects the same configs: built with validation bypassed, the static_asserts fire.
STATIC_ASSERT_CASES = [
    (dict(bd=24), "BD must divide the head dim"),
    (dict(subgroup_size=32, bk=32, bd=32, bv=32), "SG_SIZE (vector lanes) must be 4, 8 or 16"),
]


@pytest.mark.requires_xpu
@pytest.mark.parametrize("changes, message", STATIC_ASSERT_CASES, ids=["bd", "sg_size"])
def test_cpp_static_asserts_mirror_invalid_reason(cpu_queue, changes, message):
    problem = P("prefill", 64, "fp32")
    family = family_for_mode("prefill")
    config = family.config_from_params(problem, {**PREFILL, **changes})
    assert family.invalid_reason(config, problem, CPU_CAPS) is not None
    with pytest.raises(KernelCompileError) as info:
        build_program(cpu_queue, family.source_file, family.kernel_names,
                      family.defines(config, problem, CPU_CAPS))
    assert message in info.value.log


@pytest.mark.requires_xpu
def test_a_compile_error_names_the_kernel_source_and_its_own_line(cpu_queue):
    # The compiled text puts the SYCL preamble and the config's macros ahead of the source
    # (kernels/_jit.py); the log must still point at the source's own line.
    source = "#include <sycl/sycl.hpp>\n\nint broken = ;\n"
    with pytest.raises(KernelCompileError) as info:
        build_program(cpu_queue, "sdpa_decode.cpp", ["xe2t_none"], {"D": 64, "BQ": 16},
                      sources={"sdpa_decode.cpp": source})
    assert "sdpa_decode.cpp:3:" in info.value.log and "rtc_" not in info.value.log, (
        info.value.log)


@pytest.mark.requires_xpu
def test_a_config_an_error_directive_rejects_is_not_answered_from_the_cache(cpu_queue):
    # The runtime's persistent cache keys a build by its preprocessed text: XE2T_BROKEN only
    # reaches an #if, so without the macros spelled out in the text both configs would share a key.
    probe = str(Path(__file__).parents[1] / "data" / "spirv_probe.cpp")
    nonce = secrets.randbelow(10**9)  # a key no earlier run can have cached
    build_program(cpu_queue, probe, [], {"BROKEN": 0, "NONCE": nonce})
    with pytest.raises(KernelCompileError) as info:
        build_program(cpu_queue, probe, [], {"BROKEN": 1, "NONCE": nonce})
    assert "this build fails on purpose" in info.value.log


@pytest.mark.requires_xpu
def test_builds_share_one_precompiled_preamble_of_the_sycl_headers(cpu_queue, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("XE2TUNE_CACHE_DIR", str(tmp_path))
    problem = P("prefill", 64, "fp32")
    family = family_for_mode("prefill")
    config = family.config_from_params(problem, PREFILL)
    defines = family.defines(config, problem, CPU_CAPS)
    preambles = tmp_path / "sycl-preambles"
    build_program(cpu_queue, family.source_file, family.kernel_names, defines)
    first = sorted(preambles.iterdir())
    assert len(first) == 1, first
    # other macros (another config) reuse it rather than precompile their own
    build_program(cpu_queue, family.source_file, family.kernel_names,
                  {**defines, "STAGES": 0})
    assert sorted(preambles.iterdir()) == first


def test_kernel_sources_take_sycl_from_the_precompiled_preamble_alone():
    """A kernel file including <sycl/...> itself would have that parsed after the preamble on
    every build (<sycl/sycl.hpp>: the whole host API, a third of a build); each takes SYCL from
    sycl_device.hpp, whose include lines are the preamble, word for word."""
    header = (KERNEL_DIR / SYCL_HEADERS).read_text()
    preamble = _sycl_preamble(lambda name: (KERNEL_DIR / name).read_text())
    assert preamble and preamble == re.findall(r"^#include <.+>$", header, re.MULTILINE)
    for path in sorted(KERNEL_DIR.glob("*.[ch]pp")):
        if path.name != SYCL_HEADERS:
            assert not re.findall(r"^\s*#\s*include\s*<sycl", path.read_text(), re.MULTILINE), \
                f"{path.name}: include {SYCL_HEADERS!r}, not a SYCL header"


def test_reference_masks_bottom_right_and_zeroes_rows_without_keys():
    problem = P("prefill", 64, "fp32", q_len=4, kv_len=2, hq=2, hkv=1, causal=True)
    q, k, v = make_inputs(problem)
    out = reference_sdpa(problem, q, k, v)
    # query i sees keys 0 .. i - 2: rows 0 and 1 see none, row 2 sees key 0 only
    assert np.all(out[:, :2] == 0)
    np.testing.assert_allclose(out[0, 2], np.broadcast_to(v[0, 0, 0], (2, 64)), rtol=1e-12)


def test_check_output_counts_nan_first_and_applies_thresholds():
    problem = P("prefill", 64, "fp16", q_len=3, kv_len=5, hq=2, hkv=2)
    q, k, v = make_inputs(problem)
    ref = reference_sdpa(problem, q, k, v)
    good = ref.astype(np.float16)
    assert check_output(problem, good, ref).passed
    poisoned = good.copy()
    poisoned[0, 1, 1, 3] = np.nan
    report = check_output(problem, poisoned, ref)
    assert report.nonfinite == 1 and not report.passed and report.max_abs_error == np.inf
    off = good.astype(np.float32) + 0.01
    assert not check_output(problem, off, ref).passed


def test_inputs_are_seeded_non_zero_and_typed():
    problem = P("decode", 64, "bf16", q_len=2, kv_len=9)
    a = make_inputs(problem, seed=1)
    b = make_inputs(problem, seed=1)
    assert all(x.dtype == ml_dtypes.bfloat16 for x in a)
    assert all(np.array_equal(x.view(np.uint16), y.view(np.uint16)) for x, y in zip(a, b,
                                                                                   strict=True))
    assert all(np.count_nonzero(x.astype(np.float32) == 0) == 0 for x in a)
    assert a[0].shape == (1, 2, 8, 64) and a[1].shape == (1, 9, 2, 64)


@pytest.mark.parametrize("make, message", [
    (lambda: (np.zeros((4, 2, 64)),) * 3, "dtype float64 is not supported"),
    (lambda: (np.zeros((4, 2, 64), np.float16), np.zeros((4, 2, 64), np.float32),
              np.zeros((4, 2, 64), np.float32)), "dtypes differ"),
    (lambda: (np.zeros((4, 64), np.float16),) * 3, "got 2 dimensions"),
    (lambda: (np.zeros((4, 2, 100), np.float16),) * 3, "head dim 100 is not supported"),
    (lambda: (np.zeros((4, 3, 64), np.float16), np.zeros((4, 2, 64), np.float16),
              np.zeros((4, 2, 64), np.float16)), "multiple of heads_kv"),
])
def test_sdpa_rejects_bad_input_with_one_line(make, message):
    with pytest.raises(InvalidProblem, match=message) as info:
        xe2tune.sdpa(*make())
    assert "\n" not in str(info.value)


# ml_dtypes' extension takes 0.55 CPU seconds to start: an fp16 or fp32 problem's inputs, checks
# and dtype names do without it (every device process of such a search paid it).
_DTYPES_LOADED = """
import sys
import numpy as np
from xe2tune.kernels import (ProblemSpec, check_output, dtype_name, kv_dtype_name, make_inputs,
                             numpy_dtype, reference_sdpa)
for dtype in ("fp16", "fp32"):
    problem = ProblemSpec("decode", 64, dtype, 1, 64, heads_q=4, heads_kv=2)
    inputs = make_inputs(problem)
    check_output(problem, inputs[0], reference_sdpa(problem, *inputs))
    assert dtype_name(numpy_dtype(dtype)) == dtype and kv_dtype_name(numpy_dtype(dtype)) is None
print("ml_dtypes" in sys.modules)
assert dtype_name(numpy_dtype("bf16")) == "bf16"
print("ml_dtypes" in sys.modules)
"""


def test_fp16_and_fp32_problems_need_no_ml_dtypes() -> None:
    proc = subprocess.run([sys.executable, "-c", _DTYPES_LOADED], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
