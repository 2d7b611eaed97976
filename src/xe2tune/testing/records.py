"""Builders of real result values for tests and benchmarks: a device, configs, problems, OK and
failed trial results as the harness makes them, a stored study, a remote submission. Data, not
mocks; nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from xe2tune.db import DeviceRecord, ResultSubmission
from xe2tune.kernels import LauncherConfig, ProblemSpec
from xe2tune.measurement import (
    CorrectnessReport,
    RooflineFigures,
    TimingStats,
    TrialResult,
    TrialStatus,
)

if TYPE_CHECKING:
    from xe2tune.db import ResultStore

__all__ = [
    "DEVICE",
    "failed_result",
    "launcher_config",
    "ok_result",
    "prefill",
    "submission",
    "tune",
]
DEVICE = DeviceRecord(
    name="Intel(R) Arc(TM) B580 Graphics", backend="level_zero", device_type="gpu",
    driver="1.6.32224", compute_units=160, global_mem_bytes=12 * 2**30,
    local_mem_bytes=128 * 2**10, max_work_group_size=1024, sub_group_sizes=(16, 32),
    peak_flops={"fp16": 116.7e12, "bf16": 116.7e12, "fp32": 13.7e12},
    peak_bandwidth=456e9, peak_source="catalog",
)


def launcher_config(bq: int = 64, bk: int = 64, stages: int = 2, *, head_dim: int = 128,
                    bv: int = 32, family: str = "sdpa_prefill",
                    **knobs: int | str | bool) -> LauncherConfig:
    """A launcher config in the seed vocabulary (ShapeQK<bq,bk,32>, ShapePV<bq,bv,bk>, ...)."""
    return LauncherConfig(family=family, shape_qk=(bq, bk, 32), shape_pv=(bq, bv, bk),
                          shape_out=(bq, head_dim), subgroup_layout=(bq // 8, 1),
                          stages=stages, subgroup_size=16, knobs=tuple(knobs.items()))


def prefill(seq: int, *, head_dim: int = 128, dtype: str = "fp16", causal: bool = False,
            heads_q: int = 8, heads_kv: int = 8, batch: int = 1) -> ProblemSpec:
    """A prefill problem with q_len = kv_len = seq."""
    return ProblemSpec(mode="prefill", head_dim=head_dim, dtype=dtype, q_len=seq,
                       kv_len=seq, heads_q=heads_q, heads_kv=heads_kv, batch=batch,
                       causal=causal)


def ok_result(config: LauncherConfig, median_s: float, *, flops: float = 1e9,
              spread: float = 0.01) -> TrialResult:
    """An OK trial: five samples around ``median_s``, verified, with roofline figures."""
    samples = [median_s * (1 + spread * k) for k in (-2, -1, 0, 1, 2)]
    timing = TimingStats.from_samples(samples, warmup=3, n_buf=2, host_overhead_s=1e-6)
    data = flops / 100.0
    peak, bandwidth = DEVICE.peak_flops["fp16"], DEVICE.peak_bandwidth or 1.0
    attainable = min(peak, flops / data * bandwidth)
    roofline = RooflineFigures(
        flops=flops, bytes=data, arithmetic_intensity=flops / data,
        achieved_flops=flops / timing.median, achieved_bandwidth=data / timing.median,
        peak_flops=peak, peak_bandwidth=bandwidth, attainable_flops=attainable,
        roofline_fraction=flops / timing.median / attainable, peak_source="catalog",
    )
    correctness = CorrectnessReport(nonfinite=0, max_abs_error=1e-3, rel_l2_error=2e-4,
                                    atol=1e-2, rtol_l2=1e-2)
    return TrialResult(status=TrialStatus.OK, config=config, build_s=0.5, verify_s=0.1,
                       bench_s=0.2, timing=timing, correctness=correctness, roofline=roofline)


def failed_result(config: LauncherConfig, status: TrialStatus, error: str) -> TrialResult:
    """A trial that failed before timing (compile error, launch error, ...)."""
    return TrialResult(status=status, config=config, build_s=0.3, error=error)


def tune(store: ResultStore, problem: ProblemSpec, results: list[TrialResult], *,
         device: DeviceRecord = DEVICE, family: str = "sdpa_prefill",
         source_hash: str = "src-1", default_first: bool = True,
         baselines: Mapping[int, str] | None = None) -> int:
    """Store a finished study of ``results`` (the first is the default config); return its id.

    ``baselines`` labels results by index as seeded baselines (e.g. ``{0: "oneDNN default"}``).
    """
    device_id = store.upsert_device(device)
    source_id = store.upsert_kernel_source(family, source_hash)
    problem_id = store.upsert_problem(problem)
    study = store.get_or_create_study(
        device_id=device_id, kernel_source_id=source_id, problem_id=problem_id, sampler="tpe",
        optuna_study_name=f"{device.name}|{device.driver}|{family}|{source_hash}|{problem.key()}",
    )
    for number, result in enumerate(results):
        store.record_trial(study.id, result, number=number,
                           is_default=default_first and number == 0,
                           baseline=(baselines or {}).get(number))
    return study.id


def submission(config: LauncherConfig, median_s: float, problem: ProblemSpec) -> ResultSubmission:
    """A remote submission of an OK trial, built from the same values the tuner stores."""
    return ResultSubmission.from_result(ok_result(config, median_s), device=DEVICE,
                                        family="sdpa_prefill", source_hash="src-1",
                                        problem=problem)
