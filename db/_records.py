"""The records a ResultStore takes and returns: frozen pydantic models, separate from the ORM.

These cross folders (tuner -> db -> api/dashboards) and go out as JSON, so they are plain values
with no session attached: a caller may keep them, compare them and serialise them with
``model_dump(mode="json")``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from xe2tune.errors import InvalidConfig
from xe2tune.kernels import (
    HEAD_DIMS,
    HEAD_DIMS_V,
    LauncherConfig,
    ProblemSpec,
    default_head_dim_v,
)
from xe2tune.measurement import TrialResult, TrialStatus

PeakSource = Literal["catalog", "measured"]
Match = Literal["exact", "nearest"]
KvDType = Literal["e4m3", "e5m2"]
# (mode, head_dim, head_dim_v, dtype, kv_dtype, causal): what a best query must match exactly.
# A nearest answer only ever varies the lengths, heads and batch: a config tuned for MHA never
# answers latent attention (Dv != D), nor fp16/bf16 K/V an FP8 K/V query, nor the reverse.
ProblemGroup = tuple[str, int, int, str, str | None, bool]


def as_launcher_config(value: Any) -> LauncherConfig:
    """A config in its JSON form (a posted result, an export document) parsed; a
    ``LauncherConfig`` as it is.

    Raises:
        ValueError: not a launcher config (pydantic reports it as a 422 naming the field).
    """
    if isinstance(value, LauncherConfig):
        return value
    try:
        return LauncherConfig.from_dict(value)
    except InvalidConfig as exc:
        raise ValueError(f"not a launcher config: {exc.reason}") from None


RecordConfig = Annotated[
    LauncherConfig,
    PlainValidator(as_launcher_config),
    PlainSerializer(LauncherConfig.to_dict, return_type=dict[str, Any]),
    # the schema of the dict the records carried before: the API's OpenAPI document is unchanged
    WithJsonSchema({"additionalProperties": True, "type": "object"}),
]
"""A record's config: the value object in Python, its ``to_dict`` JSON form in every dump."""


def kv_dtype_conflict(dtype: str, kv_dtype: str | None) -> str | None:
    """Why an FP8 K/V format cannot go with this Q/O dtype (FP8 K/V converts to fp16/bf16 in
    registers), None when it can."""
    if kv_dtype is not None and dtype == "fp32":
        return f"kv_dtype {kv_dtype} needs dtype fp16 or bf16, got fp32"
    return None


def problem_group(problem: ProblemSpec) -> ProblemGroup:
    """The group of a tuned problem: the part of it a best query must match exactly."""
    return (problem.mode, problem.head_dim, problem.head_dim_v, problem.dtype, problem.kv_dtype,
            problem.causal)


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


@dataclass(frozen=True)
class TrialEntry:
    """One trial for ``ResultStore.record_trials``: ``record_trial``'s arguments, as a value."""

    result: TrialResult
    number: int | None = None
    is_default: bool = False
    baseline: str | None = None


class TrialRow(_Record):
    """One stored trial of a study with its measurement (None when nothing was measured)."""

    id: int
    study_id: int
    number: int | None
    config: RecordConfig
    config_hash: str
    family: str  # the config's kernel family
    baseline: str | None = None  # the seeded baseline's label, None for tuned configs
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
    """One trial flattened with its problem, device, kernel source and measurement summary.

    ``family`` is the trial's own kernel family (its config's), which a study spanning several
    families does not determine; ``baseline`` the seeded baseline's label, None when tuned.
    """

    trial_id: int
    study_id: int
    created_at: datetime
    device_id: int
    device: str
    family: str
    source_hash: str
    problem_id: int
    problem: ProblemSpec
    config: RecordConfig
    config_hash: str
    baseline: str | None = None
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
    family: str | None = None  # the trial's kernel family
    mode: Literal["prefill", "decode"] | None = None
    head_dim: int | None = None
    head_dim_v: int | None = None
    dtype: Literal["fp16", "bf16", "fp32"] | None = None
    kv_dtype: KvDType | None = None
    causal: bool | None = None
    seq_min: int | None = Field(default=None, ge=1)
    seq_max: int | None = Field(default=None, ge=1)
    status: TrialStatus | None = None
    study_id: int | None = None


class BestQuery(_Record):
    """What a launcher asks for: the key of ``xe2tune best`` and ``GET /v1/best``.

    ``seq`` is the key length (kv_len); for prefill the query length is ``q_len`` or, when None,
    ``seq``. ``heads_q``/``heads_kv``/``batch`` (and decode's ``q_len``) are "any" when None.
    ``head_dim_v`` None means the default Dv of ``head_dim`` (D itself, 512 for 576);
    ``kv_dtype`` None means K/V stored in ``dtype``: neither
    is ever "any", so the answer always comes from a problem of the same :func:`problem_group`.
    """

    head_dim: int
    dtype: Literal["fp16", "bf16", "fp32"]
    # left out of dumps when None, so queries that name neither echo as they did
    head_dim_v: int | None = Field(default=None, exclude_if=lambda v: v is None)
    kv_dtype: KvDType | None = Field(default=None, exclude_if=lambda v: v is None)
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

    @field_validator("head_dim_v")
    @classmethod
    def _known_head_dim_v(cls, value: int | None) -> int | None:
        if value is not None and value not in HEAD_DIMS_V:
            raise ValueError(f"head_dim_v {value} is not supported; accepted: "
                             + ", ".join(map(str, HEAD_DIMS_V)))
        return value

    @model_validator(mode="after")
    def _fp8_needs_a_16_bit_dtype(self) -> BestQuery:
        if (conflict := kv_dtype_conflict(self.dtype, self.kv_dtype)) is not None:
            raise ValueError(conflict)
        return self

    @property
    def group(self) -> ProblemGroup:
        """The :func:`problem_group` every candidate answer must have."""
        return (self.mode, self.head_dim, self.head_dim_v or default_head_dim_v(self.head_dim),
                self.dtype,
                self.kv_dtype, self.causal)

    @property
    def wanted_q_len(self) -> int | None:
        """The query length a candidate must have for an exact match (None = any)."""
        return self.q_len if self.q_len is not None or self.mode == "decode" else self.seq


class BaselineResult(_Record):
    """A seeded baseline config's stored result on the problem a best answer comes from.

    ``median_s`` and ``speedup`` (the baseline's median over the best's) are None when the
    baseline did not run OK (``status`` says why).
    """

    label: str
    family: str
    trial_id: int
    config: RecordConfig
    config_hash: str
    status: TrialStatus
    median_s: float | None
    speedup: float | None


class BestResult(_Record):
    """The best OK config of one tuned problem on one device, and how it was chosen.

    ``match`` is "exact" when ``problem`` is what was asked for, "nearest" when it is the closest
    tuned problem (see ``ResultStore.best``); ``query`` is None in ``best_per_problem`` lists.
    ``speedup`` is the default config's median over this one, None when the default was not
    measured OK in the same study. ``family`` is the best config's kernel family; ``baseline``
    its label when the best is itself a seeded baseline; ``baselines`` every seeded baseline
    stored for the problem, ordered by label, so a tuned result is always shown against them.
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
    config: RecordConfig
    config_hash: str
    median_s: float
    tflops: float | None
    gbps: float | None
    roofline_fraction: float | None
    peak_source: str | None
    default_median_s: float | None
    speedup: float | None
    measured_at: datetime
    baseline: str | None = None
    baselines: tuple[BaselineResult, ...] = ()
    # Rounds of the confirmation round the best, its median and the speedups come from (the
    # top configs, the default and the baselines re-timed side by side); None when the study
    # was never confirmed and they are the fastest stored trial and whatever run timed the rest.
    confirmed_rounds: int | None = None
    confirmed_at: datetime | None = None

    def launcher_config(self) -> LauncherConfig:
        """The config (``config`` itself: records carry the value object)."""
        return self.config


class BestsSince(_Record):
    """What ``ResultStore.best_per_problem_since`` read: the data version it read at and the
    bests of the problems whose results changed after the version it was given."""

    version: int
    bests: tuple[BestResult, ...]


class ConfirmationEntry(_Record):
    """One config of a confirmation round: its stored trial, why it was in, and its times.

    ``role`` is "candidate" (one of the study's fastest), "default" or "baseline" (``label``
    names it); ``median_s`` pools every round's samples (None when it failed in the round,
    ``status`` says how); ``round_medians`` are the per-round medians.
    """

    trial_id: int
    config_hash: str
    role: Literal["candidate", "default", "baseline"]
    label: str | None = None
    status: TrialStatus
    median_s: float | None = Field(default=None, gt=0)
    round_medians: tuple[float, ...] = ()


class ConfirmationRecord(_Record):
    """A confirmation round of one study: every config timed side by side, and the best.

    ``best_trial_id`` is the entry with the smallest pooled median among those that ran OK;
    ``default_median_s`` is the default's pooled median in the same round (None when the
    default was not in it or failed), so ``speedup`` never compares times of two runs.
    """

    study_id: int
    rounds: int = Field(ge=1)
    entries: tuple[ConfirmationEntry, ...] = Field(min_length=1)
    created_at: datetime | None = None

    @property
    def best(self) -> ConfirmationEntry:
        """The fastest entry that ran OK.

        Raises:
            ValueError: no entry ran OK.
        """
        ok = [e for e in self.entries if e.status is TrialStatus.OK and e.median_s]
        if not ok:
            raise ValueError("no config of the confirmation round ran OK")
        return min(ok, key=lambda e: (e.median_s, e.trial_id))

    @property
    def default(self) -> ConfirmationEntry | None:
        """The default config's entry, if it was in the round."""
        return next((e for e in self.entries if e.role == "default"), None)

    @property
    def speedup(self) -> float | None:
        """The default's pooled median over the best's, both from this round."""
        default = self.default
        if default is None or default.median_s is None:
            return None
        return default.median_s / self.best.median_s  # type: ignore[operator]


class LeaseRecord(_Record):
    """A running search process (``owner`` is unique per process and run) and its heartbeat."""

    owner: str = Field(min_length=1, max_length=64)
    host: str = Field(max_length=255)
    pid: int = Field(ge=0)
    expires_at: datetime


class SubmitOutcome(_Record):
    """What ``submit_result`` did: the trial id, and False when it was already stored."""

    trial_id: int
    study_id: int
    created: bool

