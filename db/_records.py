"""The records a ResultStore takes and returns: frozen pydantic models, separate from the ORM.

These cross folders (tuner -> db -> api/dashboards) and go out as JSON, so they are plain values
with no session attached: a caller may keep them, compare them and serialise them with
``model_dump(mode="json")``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xe2tune.harness import TrialStatus
from xe2tune.kernels import HEAD_DIMS, LauncherConfig, ProblemSpec

PeakSource = Literal["catalog", "measured"]
Match = Literal["exact", "nearest"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DeviceRecord(_Record):
    """A device results were measured on, with the peaks its roofline fractions were computed from.

    Identity is (name, backend, driver): a driver update is a new device row, because it can
    change every number. ``id`` is None on input and set on everything the store returns.
    """

    id: int | None = None
    name: str = Field(min_length=1)
    backend: str = Field(min_length=1)
    device_type: str = "gpu"
    driver: str = ""
    compute_units: int = Field(ge=0, default=0)
    global_mem_bytes: int = Field(ge=0, default=0)
    local_mem_bytes: int = Field(ge=0, default=0)
    max_work_group_size: int = Field(ge=0, default=0)
    sub_group_sizes: tuple[int, ...] = ()
    peak_flops: dict[str, float] = Field(default_factory=dict)  # FLOP/s per dtype
    peak_bandwidth: float | None = None  # B/s
    peak_source: PeakSource | None = None


class MeasuredCeilings(_Record):
    """FMA (per dtype, FLOP/s) and streaming-copy (B/s) ceilings measured on one device."""

    flops: dict[str, float]
    bandwidth: float = Field(gt=0)
    llc_bytes: int = Field(ge=0, default=0)
    measured_at: datetime | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class KernelSourceRecord(_Record):
    """One version of a kernel family's source, identified by the hash of what gets compiled."""

    id: int
    family: str
    source_hash: str
    created_at: datetime


class StudyRecord(_Record):
    """One tuning study: a (device, kernel source, problem) triple and its optuna study."""

    id: int
    device_id: int
    device_name: str
    kernel_source_id: int
    family: str
    source_hash: str
    problem_id: int
    problem: ProblemSpec
    sampler: str
    optuna_study_name: str | None
    created_at: datetime
    n_trials: int = 0
    n_ok: int = 0
    best_median_s: float | None = None


class MeasurementRecord(_Record):
    """Everything the harness measured for one trial; groups are None when not reached.

    Timing fields are None for trials that never ran timed; roofline fields are None when the
    device had no peaks; correctness fields are None for trials that never produced output.
    """

    median_s: float | None = None
    mean_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    p10_s: float | None = None
    p90_s: float | None = None
    cv: float | None = None
    warmup: int | None = None
    iterations: int | None = None  # timed launches actually run
    n_buf: int | None = None
    host_overhead_s: float | None = None
    samples: tuple[float, ...] | None = None  # only from trials() and find_trial()
    flops: float | None = None
    bytes: float | None = None
    arithmetic_intensity: float | None = None
    achieved_flops: float | None = None
    achieved_bandwidth: float | None = None
    peak_flops: float | None = None
    peak_bandwidth: float | None = None
    attainable_flops: float | None = None
    roofline_fraction: float | None = None
    peak_source: str | None = None
    nonfinite: int | None = None
    max_abs_error: float | None = None
    rel_l2_error: float | None = None
    atol: float | None = None
    rtol_l2: float | None = None
    passed: bool | None = None

    @property
    def tflops(self) -> float | None:
        """Achieved TFLOP/s at the median time."""
        return None if self.achieved_flops is None else self.achieved_flops / 1e12

    @property
    def gbps(self) -> float | None:
        """Achieved GB/s at the median time."""
        return None if self.achieved_bandwidth is None else self.achieved_bandwidth / 1e9


class TrialRow(_Record):
    """One stored trial of a study with its measurement (None when nothing was measured)."""

    id: int
    study_id: int
    number: int | None
    config: dict[str, Any]
    config_hash: str
    status: TrialStatus
    is_default: bool
    origin: Literal["local", "remote"]
    build_s: float
    verify_s: float
    bench_s: float
    error: str | None
    created_at: datetime
    measurement: MeasurementRecord | None = None
    extra: dict[str, Any] = Field(default_factory=dict)  # TrialResult.extra, as stored

    @property
    def objective(self) -> float:
        """Median seconds for OK trials, +inf otherwise: what the tuner tells optuna."""
        if self.status is TrialStatus.OK and self.measurement and self.measurement.median_s:
            return self.measurement.median_s
        return float("inf")


class ResultRow(_Record):
    """One trial flattened with its problem, device, kernel source and measurement summary."""

    trial_id: int
    study_id: int
    created_at: datetime
    device_id: int
    device: str
    family: str
    source_hash: str
    problem_id: int
    problem: ProblemSpec
    config: dict[str, Any]
    config_hash: str
    is_default: bool
    origin: Literal["local", "remote"]
    status: TrialStatus
    build_s: float
    verify_s: float
    bench_s: float
    error: str | None
    measurement: MeasurementRecord | None = None


class ResultFilters(_Record):
    """Filters of ``ResultStore.results``; None means "any". ``seq`` is the key length (kv_len)."""

    device: str | None = None  # device name (case-insensitive) or id
    family: str | None = None
    mode: Literal["prefill", "decode"] | None = None
    head_dim: int | None = None
    dtype: Literal["fp16", "bf16", "fp32"] | None = None
    causal: bool | None = None
    seq_min: int | None = Field(default=None, ge=1)
    seq_max: int | None = Field(default=None, ge=1)
    status: TrialStatus | None = None
    study_id: int | None = None


class BestQuery(_Record):
    """What a launcher asks for: the key of ``xe2tune best`` and ``GET /v1/best``.

    ``seq`` is the key length (kv_len); for prefill the query length is ``q_len`` or, when None,
    ``seq``. ``heads_q``/``heads_kv``/``batch`` (and decode's ``q_len``) are "any" when None.
    """

    head_dim: int
    dtype: Literal["fp16", "bf16", "fp32"]
    seq: int = Field(ge=1)
    mode: Literal["prefill", "decode"] = "prefill"
    causal: bool = False
    q_len: int | None = Field(default=None, ge=1)
    heads_q: int | None = Field(default=None, ge=1)
    heads_kv: int | None = Field(default=None, ge=1)
    batch: int | None = Field(default=None, ge=1)
    device: str | None = None  # device name (case-insensitive) or id; None = the only candidate

    @field_validator("head_dim")
    @classmethod
    def _known_head_dim(cls, value: int) -> int:
        if value not in HEAD_DIMS:
            raise ValueError(f"head_dim {value} is not supported; accepted: "
                             + ", ".join(map(str, HEAD_DIMS)))
        return value

    @property
    def wanted_q_len(self) -> int | None:
        """The query length a candidate must have for an exact match (None = any)."""
        return self.q_len if self.q_len is not None or self.mode == "decode" else self.seq


class BestResult(_Record):
    """The best OK config of one tuned problem on one device, and how it was chosen.

    ``match`` is "exact" when ``problem`` is what was asked for, "nearest" when it is the closest
    tuned problem (see ``ResultStore.best``); ``query`` is None in ``best_per_problem`` lists.
    ``speedup`` is the default config's median over this one, None when the default was not
    measured OK in the same study.
    """

    match: Match
    query: BestQuery | None = None
    device_id: int
    device: str
    family: str
    source_hash: str
    problem: ProblemSpec
    study_id: int
    trial_id: int
    config: dict[str, Any]
    config_hash: str
    median_s: float
    tflops: float | None
    gbps: float | None
    roofline_fraction: float | None
    peak_source: str | None
    default_median_s: float | None
    speedup: float | None
    measured_at: datetime

    def launcher_config(self) -> LauncherConfig:
        """The config as the kernels' value object."""
        return LauncherConfig.from_dict(self.config)


class SubmitOutcome(_Record):
    """What ``submit_result`` did: the trial id, and False when it was already stored."""

    trial_id: int
    study_id: int
    created: bool

