"""Measure one config on one problem: validate, build, verify, then time. Always in that order.

A config that fails any step becomes a TrialResult with that status and the reason; it can never
be "best". Build, verification and timing costs are kept apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Protocol

import dpctl
import dpctl.memory as dpm
import numpy as np

from xe2tune.errors import (
    BenchTimeout,
    KernelCompileError,
    LaunchResourceError,
)
from xe2tune.harness._bench import BenchSettings, BufferRotation, bench
from xe2tune.harness._build_gate import BuildGate, overlaps_builds
from xe2tune.harness._executor import BufferSet, PlanExecutor
from xe2tune.harness._roofline import RooflineModel
from xe2tune.kernels import (
    DeviceCaps,
    KernelFamily,
    LauncherConfig,
    ProblemSpec,
    build_program,
    check_output,
    get_family,
    make_inputs,
    reference_sdpa,
)
from xe2tune.measurement import CorrectnessReport, TimingStats, TrialResult, TrialStatus


@dataclass(frozen=True)
class MeasureRequest:
    """What to measure: one config of one family on one problem."""

    family: KernelFamily
    problem: ProblemSpec
    config: LauncherConfig
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, e.g. to cross a process boundary; the family goes by the
        config's family name (a union of families measures each config with its member)."""
        return {"problem": self.problem.to_dict(), "config": self.config.to_dict(),
                "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasureRequest:
        """Inverse of :meth:`to_dict`.

        Raises:
            InvalidConfig: for a malformed config or an unknown family.
            InvalidProblem: for a malformed problem.
        """
        config = LauncherConfig.from_dict(data["config"])
        return cls(get_family(config.family), ProblemSpec.from_dict(data["problem"]), config,
                   int(data["seed"]))


class TrialHooks(Protocol):
    """What a ConfigRunner tells about a trial while it runs; the device process implements it to
    put time limits on each step (and, in tests only, to plant faults).

    Both methods are called synchronously from the measuring thread.
    """

    def phase(self, name: str, config_hash: str) -> None:
        """A step of a config's trial starts: "build", "reference" (only when the problem's
        reference is computed), "verify", "wait" (for background builds to end before a
        timing, where builds and timings take turns), "time" (once per timing round) or "timed"
        (a timing round ended).

        Raises:
            Whatever it raises propagates out of ``measure``/``compare``.
        """
        ...

    def output(self, config_hash: str, out: np.ndarray) -> np.ndarray:
        """The kernel's output as read back; what it returns is what gets checked.

        Raises:
            Whatever it raises propagates out of ``measure``/``compare``.
        """
        ...


class _NoHooks:
    def phase(self, name: str, config_hash: str) -> None:
        pass

    def output(self, config_hash: str, out: np.ndarray) -> np.ndarray:
        return out


@dataclass(frozen=True)
class _Verified:
    """A config built and verified on its rotated buffer sets, ready to be timed."""

    base: dict[str, Any]
    executor: PlanExecutor
    rotation: BufferRotation[BufferSet]
    report: CorrectnessReport
    build_s: float
    verify_s: float

    def failed(self, status: TrialStatus, error: str) -> TrialResult:
        return TrialResult(status, build_s=self.build_s, verify_s=self.verify_s,
                           correctness=self.report, error=error, **self.base)


class ConfigRunner:
    """Runs MeasureRequests on one device queue; the tuner's and the CLI's only way to measure.

    Not thread-safe for concurrent ``measure`` calls (one device queue), but ``prebuild`` may run
    in other threads while ``measure`` runs: the build releases the GIL, and ``gate`` (by
    default: exclusive where the device is the host's CPU) keeps those builds out of timings.
    """

    def __init__(
        self,
        queue: dpctl.SyclQueue,
        caps: DeviceCaps,
        roofline: RooflineModel | None,
        settings: BenchSettings,
        llc_bytes: int = 0,
        hooks: TrialHooks | None = None,
        gate: BuildGate | None = None,
    ) -> None:
        self.queue = queue
        self.caps = caps
        self.roofline = roofline
        self.settings = settings
        self.llc_bytes = llc_bytes
        self.hooks = hooks or _NoHooks()
        self.gate = gate or BuildGate(exclusive=not overlaps_builds(caps))
        # Only the latest problem's inputs and reference are kept: a search measures one
        # problem at a time, and references of long sequences are large.
        self._reference: dict[tuple[str, int], tuple[Any, Any]] = {}
        # Compile seconds of prebuilt configs: their measurement finds them built, and reports
        # this as their build time (what the config cost to compile, wherever it compiled).
        self._prebuilt_s: dict[str, float] = {}

    def prebuild(self, request: MeasureRequest,
                 started: Callable[[], None] | None = None) -> None:
        """Compile a config ahead of its measurement (errors surface again in ``measure``),
        once the gate lets the build in; ``started`` is called then. Safe in other threads
        while ``measure`` or ``compare`` runs.
        """
        if request.family.invalid_reason(request.config, request.problem, self.caps) is None:
            plan = request.family.plan(request.config, request.problem, self.caps)
            with self.gate.building():
                if started is not None:
                    started()
                try:
                    built = build_program(self.queue, plan.source_file, plan.kernel_names,
                                          plan.defines)
                except KernelCompileError:
                    return
                if not built.cached:
                    self._prebuilt_s[request.config.config_hash()] = built.build_seconds

    def _inputs_and_reference(self, request: MeasureRequest) -> tuple[Any, Any]:
        key = (request.problem.key(), request.seed)
        if key not in self._reference:
            self._reference = {}  # drop the previous problem's arrays before making new ones
            self.hooks.phase("reference", request.config.config_hash())
            inputs = make_inputs(request.problem, seed=request.seed)
            self._reference = {key: (inputs, reference_sdpa(request.problem, *inputs))}
        return self._reference[key]

    def measure(self, request: MeasureRequest) -> TrialResult:
        """Validate, build, verify and time one config.

        Raises:
            Nothing for failures of the config itself (they become the result's status);
            anything unexpected (a broken device, a bug) propagates.
        """
        verified = self._verify(request)
        if isinstance(verified, TrialResult):
            return verified
        try:
            with self._timing(request):
                timing, bench_s = self._time(verified, self.settings)
        except (LaunchResourceError, BenchTimeout) as exc:
            return verified.failed(_failure_status(exc), str(exc))
        return self._ok(request, verified, timing, bench_s, {})

    def compare(self, requests: Sequence[MeasureRequest], rounds: int) -> list[TrialResult]:
        """Build and verify each config once, then time them side by side in ``rounds`` rounds.

        Round r times every config once, in request order for even r and reversed for odd r,
        so drift of the device over the rounds hits every config alike. The rounds share one
        timing's budget (each round gets ``time_budget_s / rounds``), so a comparison costs
        about one measurement per config, however many rounds. Each OK result's timing pools
        the samples of all its rounds; ``extra["compare"]`` holds the per-round medians and the
        round count. One result per request, in request order; a config failing in
        any round gets that failure and is not timed again.

        Raises:
            ValueError: if ``rounds`` < 1.
            Anything unexpected, as :meth:`measure`.
        """
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds}")
        results: list[TrialResult | None] = [None] * len(requests)
        verified: dict[int, _Verified] = {}
        for i, request in enumerate(requests):
            outcome = self._verify(request)
            if isinstance(outcome, TrialResult):
                results[i] = outcome
            else:
                verified[i] = outcome
        timings: dict[int, list[TimingStats]] = {i: [] for i in verified}
        per_round = replace(self.settings, time_budget_s=self.settings.time_budget_s / rounds)
        bench_s = dict.fromkeys(verified, 0.0)
        with self._timing(*(requests[i] for i in verified)):  # builds wait for every round
            for r in range(rounds):
                for i in sorted(verified, reverse=r % 2 == 1):
                    if results[i] is not None:
                        continue
                    try:
                        timing, seconds = self._time(verified[i], per_round)
                    except (LaunchResourceError, BenchTimeout) as exc:
                        results[i] = verified[i].failed(_failure_status(exc), str(exc))
                        continue
                    timings[i].append(timing)
                    bench_s[i] += seconds
        for i, v in verified.items():
            if results[i] is None:
                pooled = TimingStats.from_samples(
                    [s for t in timings[i] for s in t.samples],
                    warmup=sum(t.warmup for t in timings[i]), n_buf=len(v.rotation.sets),
                    host_overhead_s=float(np.mean([t.host_overhead_s for t in timings[i]])),
                )
                extra = {"compare": {"rounds": rounds,
                                     "round_medians_s": [t.median for t in timings[i]]}}
                results[i] = self._ok(requests[i], v, pooled, bench_s[i], extra)
        return [r for r in results if r is not None]

    def _verify(self, request: MeasureRequest) -> _Verified | TrialResult:
        """Validate, build, and check the output of one launch on the first buffer set."""
        family, problem, config = request.family, request.problem, request.config
        config_hash = config.config_hash()
        base = {"config": config}
        reason = family.invalid_reason(config, problem, self.caps)
        if reason is not None:
            return TrialResult(TrialStatus.INVALID, error=reason, **base)
        plan = family.plan(config, problem, self.caps)
        self.hooks.phase("build", config_hash)
        try:
            built = build_program(self.queue, plan.source_file, plan.kernel_names, plan.defines)
        except KernelCompileError as exc:
            return TrialResult(TrialStatus.COMPILE_ERROR, error=str(exc), **base)
        prebuilt_s = self._prebuilt_s.pop(config_hash, None)
        build_s = prebuilt_s if built.cached and prebuilt_s is not None else built.build_seconds
        # A live Intel GPU's compiler says what it spilled: no device time on such a build.
        spill = built.spill_reason()
        if spill is not None:
            return TrialResult(TrialStatus.SPILLS, build_s=build_s, error=spill, **base)
        inputs, reference = self._inputs_and_reference(request)
        self.hooks.phase("verify", config_hash)
        executor = PlanExecutor(self.queue, built, plan, problem)
        started = time.perf_counter()
        try:
            rotation = BufferRotation(
                lambda _i: executor.allocate(*inputs), self.settings.n_buf,
                executor.buffer_set_bytes, self.llc_bytes,
            )
            executor.launch_and_wait(rotation.sets[0])
        except (LaunchResourceError, dpm.USMAllocationError) as exc:
            return TrialResult(TrialStatus.LAUNCH_ERROR, build_s=build_s,
                               error=str(exc) or type(exc).__name__, **base)
        out = self.hooks.output(config_hash, executor.read_output(rotation.sets[0]))
        report = check_output(problem, out, reference)
        verified = _Verified(base, executor, rotation, report, build_s,
                             time.perf_counter() - started)
        if not report.passed:
            return verified.failed(TrialStatus.WRONG_RESULT, _wrong_result_text(report))
        return verified

    def _timing(self, *requests: MeasureRequest) -> AbstractContextManager[None]:
        """The gate held for timings of ``requests`` (none: nothing to hold); a wait for builds
        is the first one's "wait" step."""
        if not requests:
            return nullcontext()
        first = requests[0].config.config_hash()
        return self.gate.timing(lambda: self.hooks.phase("wait", first))

    def _time(self, v: _Verified, settings: BenchSettings) -> tuple[TimingStats, float]:
        """One timing of a verified config: its statistics and the wall seconds it took."""
        config_hash = v.base["config"].config_hash()
        self.hooks.phase("time", config_hash)
        v.rotation.warn_if_cache_resident(self.llc_bytes)
        started = time.perf_counter()
        timing = bench(v.executor.launch, v.rotation, settings)
        seconds = time.perf_counter() - started
        self.hooks.phase("timed", config_hash)
        return timing, seconds

    def _ok(self, request: MeasureRequest, v: _Verified, timing: TimingStats, bench_s: float,
            extra: dict[str, Any]) -> TrialResult:
        figures = self.roofline.figures(request.problem, timing.median) if self.roofline else None
        return TrialResult(
            TrialStatus.OK, build_s=v.build_s, verify_s=v.verify_s, bench_s=bench_s,
            timing=timing, correctness=v.report, roofline=figures, extra=extra, **v.base,
        )


def _failure_status(exc: LaunchResourceError | BenchTimeout) -> TrialStatus:
    return TrialStatus.LAUNCH_ERROR if isinstance(exc, LaunchResourceError) else (
        TrialStatus.TIMEOUT)


def _wrong_result_text(report: CorrectnessReport) -> str:
    return (
        f"wrong result: {report.nonfinite} non-finite, max abs error {report.max_abs_error:.3g} "
        f"(atol {report.atol:.3g}), rel L2 {report.rel_l2_error:.3g} (limit {report.rtol_l2:.3g})"
    )
