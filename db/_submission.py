"""The payload of ``POST /v1/results``: a trial measured by a remote tuner, validated on arrival.

Every string and array has a cap and every number must be finite (JSON's NaN and Infinity
extensions included): what is stored is read back by every client, and one absurd row must not
make each later answer huge or unencodable. The API also bounds the whole body.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from xe2tune.db._records import DeviceRecord, RecordConfig
from xe2tune.db._validate import trial_problems
from xe2tune.kernels import ProblemSpec
from xe2tune.measurement import (
    CorrectnessReport,
    RooflineFigures,
    TimingStats,
    TrialResult,
    TrialStatus,
)

MAX_SAMPLES = 20_000  # the harness times at most 1000 launches; a confirmation pools rounds
MAX_ERROR = 65_536  # characters of an error (a build log's first lines)
MAX_ITEMS = 64  # entries of the small maps and lists (extra, peaks, subgroup sizes)
MAX_EXTENT = 2**31 - 1  # problem sizes: a 32-bit int in the kernels and the database

ConfigField = Annotated[
    RecordConfig,
    WithJsonSchema({"type": "object",
                    "description": "a launcher config in the JSON form of "
                                   "LauncherConfig.to_dict (family, shape_qk, shape_pv, "
                                   "shape_out, subgroup_layout, stages, subgroup_size, knobs)"}),
]
"""A LauncherConfig in a payload: its JSON form on the wire, the value object in Python."""


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class DevicePayload(DeviceRecord):
    """The device of a submission: ``DeviceRecord`` with its strings (to the widths of their
    columns) and lists capped."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=256)
    backend: str = Field(min_length=1, max_length=64)
    device_type: str = Field(default="gpu", max_length=32)
    driver: str = Field(default="", max_length=128)
    compute_units: int = Field(ge=0, le=MAX_EXTENT, default=0)
    global_mem_bytes: int = Field(ge=0, le=2**63 - 1, default=0)
    local_mem_bytes: int = Field(ge=0, le=2**63 - 1, default=0)
    max_work_group_size: int = Field(ge=0, le=MAX_EXTENT, default=0)
    sub_group_sizes: tuple[int, ...] = Field(default=(), max_length=MAX_ITEMS)
    peak_flops: dict[str, float] = Field(default_factory=dict, max_length=MAX_ITEMS)


class TimingPayload(_Payload):
    """Raw per-launch device times (seconds) and how they were taken."""

    samples: list[float] = Field(min_length=1, max_length=MAX_SAMPLES)
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
    peak_source: str = Field(max_length=16)


class ResultSubmission(_Payload):
    """One trial of one config on one problem and device, measured by another machine.

    Validated like the tuner's own rows (see ``record_trial``): an inconsistent payload is a
    pydantic ``ValidationError`` naming the problem, so the API answers 422.
    """

    device: DevicePayload
    family: str = Field(min_length=1, max_length=128)
    source_hash: str = Field(min_length=1, max_length=128)
    problem: ProblemSpec
    status: TrialStatus
    config: ConfigField
    config_hash: str = Field(max_length=64)
    is_default: bool = False
    baseline: str | None = Field(default=None, min_length=1, max_length=64,
                                 description="label of a seeded baseline config, else None")
    build_s: float = Field(ge=0, default=0.0)
    verify_s: float = Field(ge=0, default=0.0)
    bench_s: float = Field(ge=0, default=0.0)
    timing: TimingPayload | None = None
    correctness: CorrectnessPayload | None = None
    roofline: RooflinePayload | None = None
    error: str | None = Field(default=None, max_length=MAX_ERROR)
    extra: dict[str, Any] = Field(default_factory=dict, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _consistent(self) -> ResultSubmission:
        if self.device.id is not None:
            raise ValueError("device.id must be omitted: devices match by name/backend/driver")
        for name in ("q_len", "kv_len", "heads_q", "heads_kv", "batch"):
            if getattr(self.problem, name) > MAX_EXTENT:
                raise ValueError(f"problem.{name} must be at most {MAX_EXTENT}")
        # The hash is the cache key that keeps a config from being measured twice: a sender's
        # must be the one this xe2tune derives from the config.
        expected = self.config.config_hash()
        if self.config_hash != expected:
            raise ValueError(f"config_hash {self.config_hash!r} does not match the config "
                             f"({expected!r})")
        problems = trial_problems(self.trial_result())
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def from_result(cls, result: TrialResult, *, device: DeviceRecord, family: str,
                    source_hash: str, problem: ProblemSpec, is_default: bool = False,
                    baseline: str | None = None) -> ResultSubmission:
        """A measured trial as the body a remote tuner posts: the inverse of
        :meth:`trial_result`, each group read from the harness's records by its own fields.

        Raises:
            pydantic.ValidationError: the result breaks a cap or rule of the payload.
        """
        timing, check, roof = result.timing, result.correctness, result.roofline
        return cls(
            device=DevicePayload.model_validate(device.model_dump(exclude={"id"})),
            family=family, source_hash=source_hash, problem=problem, status=result.status,
            config=result.config, config_hash=result.config_hash, is_default=is_default,
            baseline=baseline, build_s=result.build_s, verify_s=result.verify_s,
            bench_s=result.bench_s, error=result.error, extra=dict(result.extra),
            timing=None if timing is None else TimingPayload.model_validate(
                timing, from_attributes=True),
            correctness=None if check is None else CorrectnessPayload.model_validate(
                check, from_attributes=True),
            roofline=None if roof is None else RooflinePayload.model_validate(
                roof, from_attributes=True),
        )

    def trial_result(self) -> TrialResult:
        """The submission as the harness's own result type (its config is already one)."""
        timing = None
        if self.timing is not None:
            timing = TimingStats.from_samples(
                self.timing.samples, warmup=self.timing.warmup, n_buf=self.timing.n_buf,
                host_overhead_s=self.timing.host_overhead_s,
            )
        return TrialResult(
            status=self.status,
            config=self.config,
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
