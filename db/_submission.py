"""The payload of ``POST /v1/results``: a trial measured by a remote tuner, validated on arrival."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xe2tune.db._records import DeviceRecord
from xe2tune.db._validate import trial_problems
from xe2tune.harness import (
    CorrectnessReport,
    RooflineFigures,
    TimingStats,
    TrialResult,
    TrialStatus,
)
from xe2tune.kernels import ProblemSpec


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TimingPayload(_Payload):
    """Raw per-launch device times (seconds) and how they were taken."""

    samples: list[float] = Field(min_length=1)
    warmup: int = Field(ge=0)
    n_buf: int = Field(ge=1)
    host_overhead_s: float = 0.0


class CorrectnessPayload(_Payload):
    """Output vs the reference, as ``CorrectnessReport``."""

    nonfinite: int = Field(ge=0)
    max_abs_error: float
    rel_l2_error: float
    atol: float
    rtol_l2: float


class RooflinePayload(_Payload):
    """Work and achieved rates against the device's peaks, as ``RooflineFigures``."""

    flops: float = Field(ge=0)
    bytes: float = Field(ge=0)
    arithmetic_intensity: float = Field(ge=0)
    achieved_flops: float = Field(ge=0)
    achieved_bandwidth: float = Field(ge=0)
    peak_flops: float = Field(gt=0)
    peak_bandwidth: float = Field(gt=0)
    attainable_flops: float = Field(gt=0)
    roofline_fraction: float = Field(ge=0)
    peak_source: str


class ResultSubmission(_Payload):
    """One trial of one config on one problem and device, measured by another machine.

    Validated like the tuner's own rows (see ``record_trial``): an inconsistent payload is a
    pydantic ``ValidationError`` naming the problem, so the API answers 422.
    """

    device: DeviceRecord
    family: str = Field(min_length=1)
    source_hash: str = Field(min_length=1)
    problem: ProblemSpec
    status: TrialStatus
    config: dict[str, Any]
    config_hash: str
    is_default: bool = False
    build_s: float = Field(ge=0, default=0.0)
    verify_s: float = Field(ge=0, default=0.0)
    bench_s: float = Field(ge=0, default=0.0)
    timing: TimingPayload | None = None
    correctness: CorrectnessPayload | None = None
    roofline: RooflinePayload | None = None
    error: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> ResultSubmission:
        if self.device.id is not None:
            raise ValueError("device.id must be omitted: devices match by name/backend/driver")
        problems = trial_problems(self.trial_result())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def trial_result(self) -> TrialResult:
        """The submission as the harness's own result type."""
        timing = None
        if self.timing is not None:
            timing = TimingStats.from_samples(
                self.timing.samples, warmup=self.timing.warmup, n_buf=self.timing.n_buf,
                host_overhead_s=self.timing.host_overhead_s,
            )
        return TrialResult(
            status=self.status,
            config=dict(self.config),
            config_hash=self.config_hash,
            build_s=self.build_s,
            verify_s=self.verify_s,
            bench_s=self.bench_s,
            timing=timing,
            correctness=(CorrectnessReport(**self.correctness.model_dump())
                         if self.correctness else None),
            roofline=RooflineFigures(**self.roofline.model_dump()) if self.roofline else None,
            error=self.error,
            extra=dict(self.extra),
        )
