"""The SDPA kernels against the float64 reference on the real opencl:cpu device.

The default run covers head dims 64/128/256, every dtype, prefill and decode, q_len and kv_len
that are no multiple of any tile (1, 17, 129, 1000), GQA ratios 1/4/8, causal and not (including
q_len > kv_len, where some queries see no key), non-default configs, and a sample of the valid
space; cases share builds (one per config, head dim and dtype). The tests marked ``slow`` (run by
default; ``-m 'not slow'`` leaves them out) add every head dim x dtype x mode with the default
config and a larger sample of the valid space.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

import xe2tune
from xe2tune.harness import PlanExecutor
from xe2tune.kernels import (
    DeviceCaps,
    LauncherConfig,
    ProblemSpec,
    build_program,
    check_output,
    family_for_mode,
    make_inputs,
    reference_sdpa,
)

pytestmark = pytest.mark.requires_xpu


def run_case(queue, caps: DeviceCaps, problem: ProblemSpec, config: LauncherConfig | None = None,
             seed: int = 0):
    family = family_for_mode(problem.mode)
    config = config or family.default_config(problem, caps)
    plan = family.plan(config, problem, caps)
    built = build_program(queue, plan.source_file, plan.kernel_names, plan.defines)
    executor = PlanExecutor(queue, built, plan, problem)
    inputs = make_inputs(problem, seed=seed)
    buffers = executor.allocate(*inputs)
    executor.launch_and_wait(buffers)
    report = check_output(problem, executor.read_output(buffers), reference_sdpa(problem, *inputs))
    assert report.passed, (problem, str(config), report)
    return report


def P(mode, d, dtype, q_len, kv_len, hq, hkv, causal=False, batch=1):  # noqa: N802
    return ProblemSpec(mode, d, dtype, q_len, kv_len, heads_q=hq, heads_kv=hkv, batch=batch,
                       causal=causal)


DEFAULT_CONFIG_CASES = [
    # prefill, head dim 64 fp32
    P("prefill", 64, "fp32", 17, 17, 4, 4),
    P("prefill", 64, "fp32", 129, 1000, 8, 1, causal=True),
    P("prefill", 64, "fp32", 1000, 129, 4, 1, causal=True, batch=2),
    # prefill, head dim 128 fp16
    P("prefill", 128, "fp16", 1000, 129, 8, 2),
    P("prefill", 128, "fp16", 129, 1000, 8, 8, causal=True),
    P("prefill", 128, "fp16", 17, 1, 4, 4, causal=True),  # 16 of 17 queries see no key -> 0
    P("prefill", 128, "fp16", 1, 1000, 8, 1),
    # prefill, head dim 256 bf16
    P("prefill", 256, "bf16", 129, 129, 8, 1, causal=True, batch=2),
    P("prefill", 256, "bf16", 17, 1000, 4, 1),
    # decode, head dim 128 fp16
    P("decode", 128, "fp16", 1, 1000, 8, 8),
    P("decode", 128, "fp16", 1, 129, 32, 8),
    P("decode", 128, "fp16", 16, 17, 8, 1, causal=True),
    P("decode", 128, "fp16", 5, 1000, 16, 2, causal=True, batch=2),
    P("decode", 128, "fp16", 1, 1000, 32, 32),  # 32 KV heads per work-group (AVX2: 8)
    # decode, head dim 64 bf16
    P("decode", 64, "bf16", 1, 1, 4, 4),
    P("decode", 64, "bf16", 3, 129, 8, 1, causal=True),
    P("decode", 64, "bf16", 2, 129, 32, 16, causal=True),  # 16 per work-group (AVX2: 8)
    # decode, head dim 256 fp32
    P("decode", 256, "fp32", 1, 1000, 8, 2),
    P("decode", 256, "fp32", 16, 1000, 8, 8, causal=True),
]


@pytest.mark.parametrize("problem", DEFAULT_CONFIG_CASES, ids=lambda p: p.key())
def test_default_config_matches_reference(cpu_queue, cpu_caps, problem):
    run_case(cpu_queue, cpu_caps, problem)


# The default configs of both SIMD widths the families know (AVX2: 8 lanes x 16 registers,
# AVX-512: 16 x 32), whichever this machine has: register tiles and defaults follow the caps.
SIMD_CASES = [
    P("prefill", 128, "fp16", 300, 1000, 8, 2, causal=True),
    P("prefill", 64, "fp32", 1000, 129, 4, 4),
    P("decode", 128, "fp16", 1, 1000, 32, 8),
    P("decode", 128, "bf16", 3, 129, 8, 1, causal=True),
]


@pytest.mark.parametrize("simd", [(8, 16), (16, 32)], ids=["avx2", "avx512"])
@pytest.mark.parametrize("problem", SIMD_CASES, ids=lambda p: p.key())
def test_default_config_of_each_simd_width(cpu_queue, cpu_caps, problem, simd):
    caps = dataclasses.replace(cpu_caps, simd_width=simd[0], simd_registers=simd[1])
    run_case(cpu_queue, caps, problem)


NON_DEFAULT = {
    # dot-product S (K read in place), 4 lanes, 2 rows per work-item, no prefetch, 16 V splits
    "prefill-direct-w4": ("prefill", 128, "fp16", dict(
        bq=16, bk=8, bd=8, bv=8, stages=0, subgroup_size=4, rows_per_item=2, kv_stage=False)),
    # staged K^T/V, 16 lanes, one row per work-item, 3 blocks prefetched, one V split
    "prefill-staged-w16": ("prefill", 64, "fp32", dict(
        bq=8, bk=32, bd=32, bv=64, stages=3, subgroup_size=16, rows_per_item=1, kv_stage=True)),
    # staged K^T/V, 6 rows per work-item (BQ 96: row tiles with a tail), 2 blocks prefetched
    "prefill-staged-tm6": ("prefill", 128, "bf16", dict(
        bq=96, bk=64, bd=16, bv=16, stages=2, subgroup_size=8, rows_per_item=6, kv_stage=True)),
    # 12 rows per work-item, 16 lanes, two O vectors per V split, row tiles with a tail
    "prefill-staged-tm12": ("prefill", 128, "fp16", dict(
        bq=96, bk=32, bd=16, bv=32, stages=1, subgroup_size=16, rows_per_item=12, kv_stage=True)),
    # tiles packed once per launch by the pack kernel, read from global memory
    "prefill-packed": ("prefill", 128, "fp16", dict(
        bq=64, bk=32, bd=16, bv=32, stages=1, subgroup_size=16, rows_per_item=8, kv_stage=True,
        kv_pack=True)),
    # staged decode, several work-items per work-group, short chunks, 2 KV heads per work-group
    "decode-staged": ("decode", 128, "fp16", dict(
        bq=8, bk=16, bd=16, bv=32, stages=2, subgroup_size=8, rows_per_item=2, kv_stage=True,
        kv_chunk=128, kv_heads_per_group=2)),
    # K/V in place, KV heads of a work-group block by block, chunk longer than some kv_len
    "decode-direct-heads": ("decode", 128, "fp32", dict(
        bq=4, bk=16, bd=32, bv=16, stages=3, subgroup_size=8, rows_per_item=4, kv_stage=False,
        kv_chunk=256, kv_heads_per_group=2)),
    # the same with K and V prefetched in shares of both heads' rows, 2 blocks ahead
    "decode-direct-heads-shares": ("decode", 128, "bf16", dict(
        bq=4, bk=16, bd=32, bv=16, stages=2, subgroup_size=8, rows_per_item=4, kv_stage=False,
        kv_chunk=256, kv_heads_per_group=2, prefetch_shares=True)),
}
NON_DEFAULT_SHAPES = {
    "prefill": [(129, 1000, 8, 2, True), (1000, 17, 4, 4, False)],
    "decode": [(1, 1000, 32, 4, False), (16, 129, 8, 2, True)],
}


@pytest.mark.parametrize("name", sorted(NON_DEFAULT))
def test_non_default_configs(cpu_queue, cpu_caps, name):
    mode, d, dtype, params = NON_DEFAULT[name]
    family = family_for_mode(mode)
    for q_len, kv_len, hq, hkv, causal in NON_DEFAULT_SHAPES[mode]:
        problem = P(mode, d, dtype, q_len, kv_len, hq, hkv, causal=causal)
        run_case(cpu_queue, cpu_caps, problem, family.config_from_params(problem, params))


def test_packed_tiles_of_every_batch_and_head(cpu_queue, cpu_caps):
    family = family_for_mode("prefill")
    for problem in (P("prefill", 64, "fp32", 77, 301, 8, 2, causal=True, batch=2),
                    P("prefill", 64, "bf16", 33, 40, 4, 4, batch=3)):
        config = family.config_from_params(problem, dict(
            bq=32, bk=16, bd=16, bv=16, stages=2, subgroup_size=8, rows_per_item=4,
            kv_stage=True, kv_pack=True))
        run_case(cpu_queue, cpu_caps, problem, config)


def sample_valid_config(problem: ProblemSpec, caps: DeviceCaps, seed: int) -> LauncherConfig:
    """A uniformly drawn valid config (rejection sampling over the declared space)."""
    family = family_for_mode(problem.mode)
    space = family.parameter_space(problem)
    rng = random.Random(seed)
    for _ in range(10_000):
        params = {name: rng.choice(list(values)) for name, values in space.items()}
        config = family.config_from_params(problem, params)
        if family.invalid_reason(config, problem, caps) is None:
            return config
    raise AssertionError("no valid config drawn")


SAMPLE_PROBLEMS = [
    P("prefill", 64, "fp16", 37, 77, 8, 2, causal=True),
    P("decode", 64, "fp16", 3, 301, 8, 2, causal=True),
    P("prefill", 128, "bf16", 77, 37, 8, 1),
    P("decode", 128, "fp32", 1, 301, 8, 1),
]


@pytest.mark.parametrize(
    "index",
    [0, 1] + [pytest.param(i, marks=pytest.mark.slow) for i in range(2, 16)],
)
def test_valid_space_sample(cpu_queue, cpu_caps, index):
    problem = SAMPLE_PROBLEMS[index % len(SAMPLE_PROBLEMS)]
    run_case(cpu_queue, cpu_caps, problem, sample_valid_config(problem, cpu_caps, seed=index),
             seed=index)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["prefill", "decode"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("head_dim", [64, 96, 128, 192, 256])
def test_every_head_dim_and_dtype(cpu_queue, cpu_caps, mode, dtype, head_dim):
    q_len = 129 if mode == "prefill" else 7
    run_case(cpu_queue, cpu_caps, P(mode, head_dim, dtype, q_len, 1000, 8, 2, causal=True))


def test_sdpa_entry_point_3d_and_dtype(cpu_queue):
    """xe2tune.sdpa picks the family from q_len, keeps the dtype and accepts 3-D arrays."""
    problem = P("prefill", 64, "fp16", 33, 50, 4, 2, causal=True)
    q, k, v = make_inputs(problem, seed=3)
    out = xe2tune.sdpa(q[0], k[0], v[0], causal=True, device=cpu_queue)
    assert out.shape == q[0].shape and out.dtype == np.float16
    assert check_output(problem, out[None], reference_sdpa(problem, q, k, v)).passed


def test_sdpa_entry_point_scale_and_decode(cpu_queue):
    problem = P("decode", 64, "bf16", 2, 300, 8, 2)
    q, k, v = make_inputs(problem, seed=4)
    out = xe2tune.sdpa(q, k, v, scale=0.3, device=cpu_queue)
    assert out.dtype == q.dtype
    assert check_output(problem, out, reference_sdpa(problem, q, k, v, scale=0.3)).passed
