"""Measure one config on one problem: validate, build, verify, then time. Always in that order.

A config that fails any step becomes a TrialResult with that status and the reason; it can never
be "best". Build, verification and timing costs are kept apart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import dpctl

from xe2tune.errors import (
    BenchTimeout,
    KernelCompileError,
    LaunchResourceError,
)
from xe2tune.harness._bench import BenchSettings, BufferRotation, bench
from xe2tune.harness._executor import PlanExecutor
from xe2tune.harness._measurement import CorrectnessReport, TrialResult, TrialStatus
from xe2tune.harness._roofline import RooflineModel
from xe2tune.kernels import (
    DeviceCaps,
    KernelFamily,
    LauncherConfig,
    ProblemSpec,
    build_program,
    check_output,
    make_inputs,
    reference_sdpa,
)


@dataclass(frozen=True)
class MeasureRequest:
    """What to measure: one config of one family on one problem."""

    family: KernelFamily
    problem: ProblemSpec
    config: LauncherConfig
    seed: int = 0


class ConfigRunner:
    """Runs MeasureRequests on one device queue; the tuner's and the CLI's only way to measure.

    Not thread-safe for concurrent ``measure`` calls (one device queue), but ``prebuild`` may run
    in another thread while ``measure`` runs: the build releases the GIL.
    """

    def __init__(
        self,
        queue: dpctl.SyclQueue,
        caps: DeviceCaps,
        roofline: RooflineModel | None,
        settings: BenchSettings,
        llc_bytes: int = 0,
    ) -> None:
        self.queue = queue
        self.caps = caps
        self.roofline = roofline
        self.settings = settings
        self.llc_bytes = llc_bytes
        # Only the latest problem's inputs and reference are kept: a search measures one
        # problem at a time, and references of long sequences are large.
        self._reference: dict[tuple[str, int], tuple[object, object]] = {}

    def prebuild(self, request: MeasureRequest) -> None:
        """Compile a config ahead of its measurement (errors surface again in ``measure``)."""
        if request.family.invalid_reason(request.config, request.problem, self.caps) is None:
            plan = request.family.plan(request.config, request.problem, self.caps)
            try:
                build_program(self.queue, plan.source_file, plan.kernel_names, plan.defines)
            except KernelCompileError:
                pass

    def _inputs_and_reference(self, problem: ProblemSpec, seed: int) -> tuple[object, object]:
        key = (problem.key(), seed)
        if key not in self._reference:
            inputs = make_inputs(problem, seed=seed)
            self._reference = {key: (inputs, reference_sdpa(problem, *inputs))}
        return self._reference[key]

    def measure(self, request: MeasureRequest) -> TrialResult:
        """Validate, build, verify and time one config.

        Raises:
            Nothing for failures of the config itself (they become the result's status);
            anything unexpected (a broken device, a bug) propagates.
        """
        family, problem, config = request.family, request.problem, request.config
        base = {"config": config.to_dict(), "config_hash": config.config_hash()}
        reason = family.invalid_reason(config, problem, self.caps)
        if reason is not None:
            return TrialResult(TrialStatus.INVALID, error=reason, **base)
        plan = family.plan(config, problem, self.caps)
        try:
            built = build_program(self.queue, plan.source_file, plan.kernel_names, plan.defines)
        except KernelCompileError as exc:
            return TrialResult(TrialStatus.COMPILE_ERROR, error=str(exc), **base)
        build_s = built.build_seconds
        inputs, reference = self._inputs_and_reference(problem, request.seed)
        executor = PlanExecutor(self.queue, built, plan, problem)
        try:
            started = time.perf_counter()
            rotation = BufferRotation(
                lambda _i: executor.allocate(*inputs), self.settings.n_buf,
                executor.buffer_set_bytes, self.llc_bytes,
            )
            executor.launch_and_wait(rotation.sets[0])
            report = check_output(problem, executor.read_output(rotation.sets[0]), reference)
            verify_s = time.perf_counter() - started
            if not report.passed:
                return TrialResult(
                    TrialStatus.WRONG_RESULT, build_s=build_s, verify_s=verify_s,
                    correctness=report, error=_wrong_result_text(report), **base,
                )
            rotation.warn_if_cache_resident(self.llc_bytes)
            started = time.perf_counter()
            timing = bench(executor.launch, rotation, self.settings)
            bench_s = time.perf_counter() - started
        except LaunchResourceError as exc:
            return TrialResult(TrialStatus.LAUNCH_ERROR, build_s=build_s, error=str(exc), **base)
        except BenchTimeout as exc:
            return TrialResult(TrialStatus.TIMEOUT, build_s=build_s, error=str(exc), **base)
        figures = self.roofline.figures(problem, timing.median) if self.roofline else None
        return TrialResult(
            TrialStatus.OK, build_s=build_s, verify_s=verify_s, bench_s=bench_s, timing=timing,
            correctness=report, roofline=figures, **base,
        )


def _wrong_result_text(report: CorrectnessReport) -> str:
    return (
        f"wrong result: {report.nonfinite} non-finite, max abs error {report.max_abs_error:.3g} "
        f"(atol {report.atol:.3g}), rel L2 {report.rel_l2_error:.3g} (limit {report.rtol_l2:.3g})"
    )

