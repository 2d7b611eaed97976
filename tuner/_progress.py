"""What a study's loop reports and works with: its progress and each trial's outcome."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from xe2tune.db import ConfirmationRecord, TrialRow
from xe2tune.harness import TrialResult, TrialStatus
from xe2tune.kernels import LauncherConfig, ProblemSpec


@dataclass
class StudyProgress:
    """What the observer sees after every trial."""

    problem: ProblemSpec
    space_size: int
    cartesian_size: int
    trial_index: int  # trials started in this run, 1-based
    trials_budget: int
    config: LauncherConfig | None = None  # the trial being measured
    phase: str = "starting"
    best: Outcome | None = None
    default: Outcome | None = None
    reused: int = 0
    measured: int = 0
    failed: int = 0
    requeued: int = 0  # trials of killed searches put back in the queue at the start
    build_s: float = 0.0
    verify_s: float = 0.0
    bench_s: float = 0.0
    stored: int = 0  # the study's trials stored before this run
    # the rest of the study's wall time, for a run's timeline (benchmarks/first_contact.py)
    enumerate_s: float = 0.0  # the valid space, the default and the baselines
    setup_s: float = 0.0  # the study's rows, its optuna study and its warm start
    store_s: float = 0.0  # each trial's result stored and told to optuna
    confirm_s: float = 0.0  # the confirmation round
    confirmation: ConfirmationRecord | None = None
    skipped: str | None = None  # why the problem was not searched at all
    started: float = field(default_factory=time.perf_counter)

    def count(self, result: Outcome, default: LauncherConfig) -> bool:
        """Count a trial's outcome (``default``: the study's default config); True when it is
        the new best."""
        if result.config == default and result.status is TrialStatus.OK:
            self.default = result
        if result.status is not TrialStatus.OK:
            self.failed += 1
            return False
        if self.best is None or result.objective < self.best.objective:
            self.best = result
            return True
        return False


Observer = Callable[[StudyProgress], None]


@dataclass(frozen=True)
class Outcome:
    """What the loop needs of a trial, whether measured now or read back from the store."""

    status: TrialStatus
    config: LauncherConfig
    median_s: float | None
    tflops: float | None
    roofline_fraction: float | None
    error: str | None
    build_s: float = 0.0
    verify_s: float = 0.0
    bench_s: float = 0.0

    @property
    def objective(self) -> float:
        ok = self.status is TrialStatus.OK and self.median_s is not None
        return self.median_s if ok else math.inf

    @classmethod
    def from_result(cls, r: TrialResult) -> Outcome:
        return cls(
            status=r.status, config=r.config,
            median_s=r.timing.median if r.timing else None,
            tflops=r.roofline.tflops if r.roofline else None,
            roofline_fraction=r.roofline.roofline_fraction if r.roofline else None,
            error=r.error, build_s=r.build_s, verify_s=r.verify_s, bench_s=r.bench_s,
        )

    @classmethod
    def from_row(cls, row: TrialRow) -> Outcome:
        """A stored trial."""
        m = row.measurement
        return cls(
            status=row.status, config=row.config,
            median_s=m.median_s if m else None,
            tflops=m.achieved_flops / 1e12 if m and m.achieved_flops else None,
            roofline_fraction=m.roofline_fraction if m else None, error=row.error,
        )

    def timed_at(self, median_s: float) -> Outcome:
        """The same config re-timed at ``median_s``: rates scale with the time."""
        scale = self.median_s / median_s if self.median_s else 1.0
        return replace(
            self, median_s=median_s,
            tflops=None if self.tflops is None else self.tflops * scale,
            roofline_fraction=(None if self.roofline_fraction is None
                               else self.roofline_fraction * scale))
