"""Time limits of a trial's steps in the device process: past its limit a step is killed.

A build gets a fixed, configurable limit (``XE2TUNE_BUILD_TIMEOUT``). Verification and timing
get a limit derived from the problem: the roofline model's ideal time of one launch, times a
generous slowdown, for each launch the bench settings' time budget does not bound, plus that
budget and a floor. The float64 reference gets a limit from its FLOP count at a slow host rate.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from xe2tune.config import build_timeout_s
from xe2tune.harness._bench import BenchSettings
from xe2tune.harness._peaks import DevicePeaks
from xe2tune.harness._roofline import sdpa_work
from xe2tune.kernels import ProblemSpec

DEFAULT_BUILD_S = 120.0  # a cold build of the largest prefill config takes ~10 s on 2 cores


@dataclass(frozen=True)
class TrialLimits:
    """How long each step of a trial may take before the device process is killed."""

    build_s: float = DEFAULT_BUILD_S
    run_floor_s: float = 30.0  # the least verification + timing ever get (allocation, checks)
    slowdown: float = 100.0  # a launch may be this much slower than the roofline's ideal time
    # The float64 reference ran at 3.5 GFLOP/s on 2 cores (hd128 s2048); 14x below that.
    reference_flops_per_s: float = 2.5e8
    startup_s: float = 120.0  # a device process's start: imports, the device queue, the extension

    def __post_init__(self) -> None:
        for f in fields(self):
            if not getattr(self, f.name) > 0:
                raise ValueError(f"{f.name} must be positive, got {getattr(self, f.name)}")

    @classmethod
    def from_env(cls) -> TrialLimits:
        """The defaults, with the build limit from ``XE2TUNE_BUILD_TIMEOUT`` when set.

        Raises:
            InvalidConfig: if ``XE2TUNE_BUILD_TIMEOUT`` is not a positive number.
        """
        chosen = build_timeout_s()
        return cls() if chosen is None else cls(build_s=chosen)

    def run_s(self, problem: ProblemSpec, peaks: DevicePeaks | None,
              settings: BenchSettings) -> float:
        """The limit of one config's verification, and of each of its timings.

        Without peaks a launch is allowed ``settings.launch_timeout_s``, as it is with peaks
        when the slowdown allowance exceeds that.
        """
        per_launch = settings.launch_timeout_s
        if peaks is not None:
            work = sdpa_work(problem)
            ideal = max(work.flops / peaks.peak_flops(problem.dtype), work.bytes / peaks.bandwidth)
            per_launch = min(per_launch, self.slowdown * ideal)
        # The bench spends its time budget on the repetitions and half of it on warm-ups; the
        # launches it does not bound: the verification run, the priming call, the estimate
        # calls, and at least one warm-up and one repetition.
        unbounded = 4 + settings.estimate_calls
        return self.run_floor_s + 1.5 * settings.time_budget_s + unbounded * per_launch

    def reference_s(self, problem: ProblemSpec) -> float:
        """The limit of making the problem's inputs and float64 reference (every pair, masked
        or not, is computed)."""
        p = problem
        flops = 2.0 * p.batch * p.heads_q * p.q_len * p.kv_len * (p.head_dim + p.head_dim_v)
        return self.run_floor_s + flops / self.reference_flops_per_s
