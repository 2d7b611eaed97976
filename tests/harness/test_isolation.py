"""Trial isolation: builds and measurements in a supervised worker process, under time limits.

Faults are planted in the real worker process through the test-only ``XE2TUNE_FAULTS`` hook (a
build that never returns, a launch that never returns, a SIGSEGV mid-trial, a corrupted output);
everything else is the real opencl:cpu device, real processes and real signals.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from xe2tune.errors import InvalidConfig, TrialAbandoned
from xe2tune.harness import (
    BenchSettings,
    DevicePeaks,
    DeviceProcessSpec,
    MeasureRequest,
    TimingStats,
    TrialLimits,
    TrialResult,
    TrialStatus,
    problem_unfit_reason,
)
from xe2tune.kernels import DeviceCaps, LauncherConfig, ProblemSpec, build_program, family_for_mode
from xe2tune.tuner import PhaseMark, SupervisedTrialRunner

PROBLEM = ProblemSpec(mode="prefill", head_dim=64, dtype="fp32", q_len=64, kv_len=64,
                      heads_q=2, heads_kv=2)
FAMILY = family_for_mode("prefill")
SETTINGS = BenchSettings(warmup=2, iterations=10, time_budget_s=0.1)
# Stated peaks of the order of this host's measured ceilings, so the run limit is the floor's.
PEAKS = DevicePeaks(flops={"fp16": 1e11, "bf16": 1e11, "fp32": 1e11}, bandwidth=2e10,
                    source="measured")
# Builds come from the SYCL persistent cache (the fixture warms it: a build then takes about
# 0.4 s), so 8 s is generous; so is 5 s for verifying and timing this tiny problem (0.1 s of
# timing). The hangs below each wait their limit out: these are the suite's waiting time.
LIMITS = TrialLimits(build_s=8.0, run_floor_s=5.0, startup_s=90.0)
SLACK_S = 4.0  # killing and reaping a worker, and the pipe


def request(config: LauncherConfig) -> MeasureRequest:
    return MeasureRequest(FAMILY, PROBLEM, config)


def make_runner(limits: TrialLimits = LIMITS, *, overlap: bool = False) -> SupervisedTrialRunner:
    spec = DeviceProcessSpec("opencl:cpu", SETTINGS, PEAKS, 0, overlap)
    return SupervisedTrialRunner(spec, limits)


@pytest.fixture(scope="module")
def configs(cpu_queue, cpu_caps) -> list[LauncherConfig]:
    """Six valid configs of the small problem, the default first, their builds cached."""
    default = FAMILY.default_config(PROBLEM, cpu_caps)
    params = FAMILY.params_from_config(default)
    found = [default]
    # The default's tile depends on the machine (vector width, cores), so which neighbours are
    # valid does too: offer more than six.
    for rows in (8, 6, 4, 2, 1):
        for bk in (64, 32, 16):
            config = FAMILY.config_from_params(PROBLEM, {**params, "rows_per_item": rows,
                                                         "bk": bk})
            if config not in found and FAMILY.invalid_reason(config, PROBLEM, cpu_caps) is None:
                found.append(config)
    assert len(found) >= 6
    for config in found[:6]:  # fills the SYCL persistent cache the workers build from
        plan = FAMILY.plan(config, PROBLEM, cpu_caps)
        build_program(cpu_queue, plan.source_file, plan.kernel_names, plan.defines)
    return found[:6]


def plant(monkeypatch: pytest.MonkeyPatch, faults: dict[LauncherConfig, str]) -> None:
    monkeypatch.setenv("XE2TUNE_FAULTS",
                       json.dumps({c.config_hash(): fault for c, fault in faults.items()}))


def marks_of(runner: SupervisedTrialRunner, config: LauncherConfig, phase: str) -> list[float]:
    return [m.t for m in runner.timeline
            if m.config_hash == config.config_hash() and m.phase == phase]


@pytest.mark.slow
@pytest.mark.requires_xpu
def test_planted_faults_fail_alone_with_their_reason_within_the_limits(monkeypatch, configs):
    ok_first, build_hang, run_hang, crash, wrong, ok_last = configs
    plant(monkeypatch, {build_hang: "build_hang", run_hang: "run_hang", crash: "crash",
                        wrong: "wrong_result"})
    runner = make_runner()
    returned: dict[str, float] = {}
    try:
        runner.start()
        started = time.monotonic()
        results = []
        for config in configs:
            results.append(runner.measure(request(config)))
            returned[config.config_hash()] = time.monotonic()
        wall = time.monotonic() - started
    finally:
        runner.close()

    assert [r.status for r in results] == [
        TrialStatus.OK, TrialStatus.BUILD_TIMEOUT, TrialStatus.RUN_TIMEOUT, TrialStatus.CRASH,
        TrialStatus.WRONG_RESULT, TrialStatus.OK]
    assert [r.config_hash for r in results] == [c.config_hash() for c in configs]
    assert results[1].extra["failed_step"] == "build" and "8 s limit" in results[1].error
    assert results[2].extra["failed_step"] == "time"
    assert "signal 11 (SIGSEGV)" in results[3].error
    assert results[3].extra["failed_step"] == "verify"
    assert results[4].correctness is not None and not results[4].correctness.passed
    assert results[5].timing is not None and results[5].roofline is not None

    # Each hang cost its step's limit, no more.
    build_started = marks_of(runner, build_hang, "build")[0]
    held = returned[build_hang.config_hash()] - build_started
    assert LIMITS.build_s <= held < LIMITS.build_s + SLACK_S
    run_limit = LIMITS.run_s(PROBLEM, PEAKS, SETTINGS)
    assert run_limit < LIMITS.run_floor_s + 1  # derived from the problem: the floor dominates
    time_started = marks_of(runner, run_hang, "time")[0]
    held = returned[run_hang.config_hash()] - time_started
    assert run_limit <= held < run_limit + SLACK_S
    # A fresh worker after each kill or crash, none after a wrong result.
    assert len(runner.startups) == 4
    # The whole run is bounded by the limits: per trial at most a start, a build, the
    # reference, a verification and a timing, each within its limit.
    per_trial = (LIMITS.startup_s + LIMITS.build_s + LIMITS.reference_s(PROBLEM)
                 + 2 * run_limit)
    assert wall <= len(configs) * per_trial
    assert wall < LIMITS.build_s + run_limit + len(configs) * 30


def _intervals(marks: list[PhaseMark], begin: str, end: str) -> list[tuple[float, float]]:
    """[``begin`` mark, the same config's next ``end`` mark) of each ``begin`` in a timeline."""
    spans = []
    for i, m in enumerate(marks):
        if m.phase == begin:
            ends = (n.t for n in marks[i + 1:] if n.phase == end
                    and n.config_hash == m.config_hash)
            spans.append((m.t, next(ends, float("inf"))))
    return spans


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.requires_xpu
def test_on_the_cpu_device_builds_run_ahead_but_never_beside_a_timing(configs):
    chosen = configs[:5]
    timelines = {}
    for overlap in (False, True):  # True is what a GPU does; forced here to tell them apart
        runner = make_runner(overlap=overlap)
        depth = runner.spec.build_threads  # what the device process can build at once
        assert depth == 2
        try:
            runner.start()
            for config in chosen[1:1 + depth]:
                runner.prebuild(request(config))
            for i, config in enumerate(chosen):  # a loop keeping `depth` configs built ahead
                if i + 1 + depth <= len(chosen) - 1:
                    runner.prebuild(request(chosen[i + 1 + depth]))
                result = runner.measure(request(config))
                assert result.status is TrialStatus.OK
                assert result.build_s > 0  # a prebuilt config reports its background compile
            runner.prebuild(request(configs[5]))  # in flight when the comparison starts
            compared = runner.compare([request(c) for c in chosen[:2]], rounds=2)
            assert [r.status for r in compared] == [TrialStatus.OK, TrialStatus.OK]
        finally:
            runner.close()
        timelines[overlap] = list(runner.timeline)

    for overlap, marks in timelines.items():
        built_ahead = [m.config_hash for m in marks if m.phase == "background build"]
        # On the CPU device a prebuild waits for a measurement that needs it, so the last one,
        # asked before the comparison and never measured, is never built.
        ahead = chosen[1:] + [configs[5]] if overlap else chosen[1:]
        # two threads: the order in which two builds start is theirs
        assert sorted(built_ahead) == sorted(c.config_hash() for c in ahead)
        # each timing's span ends with its own mark
        assert len(_intervals(marks, "time", "timed")) == 5 + 2 * 2
        assert all(end < float("inf") for _, end in _intervals(marks, "time", "timed"))
    cpu = timelines[False]
    builds = _intervals(cpu, "background build", "background built")
    timings = _intervals(cpu, "time", "timed")
    assert all(end < float("inf") for _, end in builds)
    assert not any(_overlap(b, t) for b in builds for t in timings)
    # Only the first config, asked before any other, is built by its own measurement.
    assert [m.config_hash for m in cpu if m.phase == "build"][0] == chosen[0].config_hash()


@pytest.mark.slow
@pytest.mark.requires_xpu
def test_a_background_build_over_its_limit_fails_its_own_config_not_the_one_measured(
        monkeypatch, configs):
    fine, hung, after = configs[0], configs[1], configs[2]
    plant(monkeypatch, {hung: "build_hang"})
    runner = make_runner()
    try:
        runner.start()
        runner.prebuild(request(hung))
        started = time.monotonic()
        first = runner.measure(request(fine))  # its timing waits for the hung build: killed
        held = time.monotonic() - started
        second = runner.measure(request(hung))  # answered from the kill, not built again
        third = runner.measure(request(after))
    finally:
        runner.close()
    assert first.status is TrialStatus.OK and first.timing is not None
    assert held < LIMITS.build_s + LIMITS.startup_s
    assert second.status is TrialStatus.BUILD_TIMEOUT
    assert second.extra["failed_step"] == "build" and "background build" in second.error
    assert third.status is TrialStatus.OK
    assert len(runner.startups) == 2  # the killed one and the fresh one that measured again


@pytest.mark.slow
@pytest.mark.requires_xpu
def test_compare_times_configs_in_alternating_rounds_and_a_crash_fails_alone(
        monkeypatch, configs):
    first, crash, last = configs[0], configs[3], configs[5]
    plant(monkeypatch, {crash: "crash"})
    runner = make_runner()
    try:
        results = runner.compare([request(first), request(crash), request(last)], rounds=3)
    finally:
        runner.close()
    assert [r.status for r in results] == [TrialStatus.OK, TrialStatus.CRASH, TrialStatus.OK]
    for result in (results[0], results[2]):
        rounds = result.extra["compare"]["round_medians_s"]
        assert len(rounds) == 3 and all(r > 0 for r in rounds)
        assert result.timing is not None and len(result.timing.samples) == (
            result.timing.iterations)
        assert 3 <= result.timing.iterations <= 3 * SETTINGS.iterations
    timed = [m.config_hash for m in runner.timeline if m.phase == "time"]
    a, b = first.config_hash(), last.config_hash()
    assert timed == [a, b, b, a, a, b]  # one worker after the crash, order alternating
    assert len(runner.startups) == 2


@pytest.mark.requires_xpu
def test_abandon_from_a_signal_handler_stops_a_hung_launch_at_once(monkeypatch, configs):
    hung, fine = configs[2], configs[0]
    plant(monkeypatch, {hung: "run_hang"})
    runner = make_runner(TrialLimits(build_s=60.0, run_floor_s=300.0))
    fired: list[float] = []

    def on_alarm(_signum: int, _frame: object) -> None:
        fired.append(time.monotonic())
        runner.abandon()

    def alarm_once_hung() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if runner.timeline and runner.timeline[-1].phase == "time":
                signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)
                return
            time.sleep(0.05)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        runner.start()
        threading.Thread(target=alarm_once_hung, daemon=True).start()
        with pytest.raises(TrialAbandoned):
            runner.measure(request(hung))
        assert fired and time.monotonic() - fired[0] < SLACK_S
        runner.abandon()  # while idle: the next measure is not abandoned, just fresh
        assert runner.measure(request(fine)).status is TrialStatus.OK
    finally:
        signal.signal(signal.SIGALRM, previous)
        runner.close()
    assert len(runner.startups) == 2


def test_trial_results_cross_the_process_boundary_unchanged():
    config = LauncherConfig.from_dict({
        "family": "sdpa_prefill", "shape_qk": [64, 32, 16], "shape_pv": [64, 16, 32],
        "shape_out": [64, 64], "subgroup_layout": [8, 1], "stages": 1, "subgroup_size": 8})
    timing = TimingStats.from_samples([2e-4, 1e-4, 3e-4], warmup=2, n_buf=4,
                                      host_overhead_s=1e-6)
    result = TrialResult(TrialStatus.RUN_TIMEOUT, config, build_s=1.5, timing=timing,
                         error="x", extra={"failed_step": "time"})
    assert TrialResult.from_dict(json.loads(json.dumps(result.to_dict())), config) == result
    back = MeasureRequest.from_dict(json.loads(json.dumps(request(config).to_dict())))
    assert back == request(config)


def test_run_limit_grows_with_the_problem_from_a_floor():
    limits = TrialLimits(run_floor_s=30.0)
    small = limits.run_s(PROBLEM, PEAKS, SETTINGS)
    big = ProblemSpec(mode="prefill", head_dim=128, dtype="fp16", q_len=4096, kv_len=4096)
    assert 30.0 <= small < 31.0
    assert limits.run_s(big, PEAKS, SETTINGS) > small + 60
    # A launch never gets more than the bench's own per-launch limit.
    capped = limits.run_s(big, None, SETTINGS)
    assert capped == limits.run_s(big, DevicePeaks({"fp16": 1.0}, 1.0, "measured"), SETTINGS)
    assert limits.reference_s(big) > limits.reference_s(PROBLEM) >= 30.0
    with pytest.raises(ValueError, match="build_s"):
        TrialLimits(build_s=0)


CPU_24G = DeviceCaps(name="cpu", backend="opencl", device_type="cpu", max_work_group_size=8192,
                     sub_group_sizes=(8, 16), local_mem_bytes=256 << 10, compute_units=2,
                     global_mem_bytes=24 << 30)


def test_problems_that_cannot_be_measured_here_are_named_before_any_trial():
    huge = ProblemSpec(mode="prefill", head_dim=64, dtype="fp16", q_len=100_000,
                       kv_len=100_000)
    reason = problem_unfit_reason(huge, CPU_24G, available_bytes=20 << 30)
    assert reason is not None and "float64 reference needs" in reason and "\n" not in reason
    assert problem_unfit_reason(PROBLEM, CPU_24G, available_bytes=20 << 30) is None
    long_kv = ProblemSpec(mode="decode", head_dim=128, dtype="fp16", q_len=1,
                          kv_len=50_000_000, heads_q=8, heads_kv=8)
    small_gpu = dataclasses.replace(CPU_24G, device_type="gpu", global_mem_bytes=8 << 30)
    reason = problem_unfit_reason(long_kv, small_gpu, available_bytes=1 << 40)
    assert reason is not None and "rotated buffer sets need" in reason


@pytest.mark.parametrize(("name", "value", "needle"), [
    ("XE2TUNE_BUILD_TIMEOUT", "soon", "positive number"),
    ("XE2TUNE_BUILD_TIMEOUT", "-3", "positive number"),
    ("XE2TUNE_FAULTS", "{not json", "JSON object"),
    ("XE2TUNE_FAULTS", '{"abc": "explode"}', "build_hang"),
])
def test_bad_environment_values_are_one_line_errors(monkeypatch, name, value, needle):
    from xe2tune.config import planted_faults

    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidConfig, match=needle):
        TrialLimits.from_env() if name == "XE2TUNE_BUILD_TIMEOUT" else planted_faults()


def _bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["xe2tune", "bench", "--head-dim", "64", "--dtype", "fp32", *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=400)


@pytest.mark.slow
@pytest.mark.requires_xpu
def test_bench_with_a_hung_build_ends_at_the_build_limit(cpu_caps):
    problem = ProblemSpec(mode="prefill", head_dim=64, dtype="fp32", q_len=64, kv_len=64,
                          heads_q=2, heads_kv=2)
    default = FAMILY.default_config(problem, cpu_caps).config_hash()
    proc = _bench("--seq", "64", "--heads-q", "2", "--heads-kv", "2", "--json",
                  env={"XE2TUNE_FAULTS": json.dumps({default: "build_hang"}),
                       "XE2TUNE_BUILD_TIMEOUT": "3"})
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "build_timeout" and out["config_hash"] == default
    assert "3 s limit" in out["error"]


@pytest.mark.slow
@pytest.mark.requires_xpu
def test_bench_of_a_problem_whose_reference_cannot_fit_is_a_one_line_error():
    proc = _bench("--seq", "100000", "--mode", "prefill")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "float64 reference needs" in lines[0], proc.stderr
