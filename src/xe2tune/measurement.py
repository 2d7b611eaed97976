"""What one measurement of one config produces: timing statistics, roofline figures, checks.

These records cross folders (kernels check outputs, the harness measures, the tuner scores, the
database stores, the API serves), so they live here, importable by every side without the device
runtime; ``xe2tune.harness`` re-exports them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    # Only a type here: kernels imports this module (its output check makes CorrectnessReport),
    # so a result is given its config by whoever made or received it (see ``from_dict``).
    from xe2tune.kernels import LauncherConfig

T = TypeVar("T")


def _numpy() -> Any:
    # Imported by the first statistic, not with this module: every CLI command imports these
    # records, and most never compute one (NumPy's import is a fifth of a command's start-up).
    import numpy

    return numpy


@dataclass(frozen=True)
class TimingStats:
    """Statistics over per-launch device times (seconds), plus the harness's own cost.

    ``samples`` keeps every timed launch so nothing is lost to a summary; ``host_overhead_s`` is
    wall time per launch minus device time per launch (submission, rotation, profiling reads).
    """

    samples: tuple[float, ...]
    warmup: int
    iterations: int
    n_buf: int
    host_overhead_s: float

    @classmethod
    def from_samples(
        cls, samples: Sequence[float], *, warmup: int, n_buf: int, host_overhead_s: float
    ) -> TimingStats:
        if not samples:
            raise ValueError("no timed samples")
        return cls(tuple(float(s) for s in samples), warmup, len(samples), n_buf,
                   host_overhead_s)

    @property
    def median(self) -> float:
        return float(_numpy().median(self.samples))

    @property
    def mean(self) -> float:
        return float(_numpy().mean(self.samples))

    @property
    def min(self) -> float:
        return float(_numpy().min(self.samples))

    @property
    def max(self) -> float:
        return float(_numpy().max(self.samples))

    @property
    def p10(self) -> float:
        return float(_numpy().percentile(self.samples, 10))

    @property
    def p90(self) -> float:
        return float(_numpy().percentile(self.samples, 90))

    @property
    def cv(self) -> float:
        """Coefficient of variation (population std / mean)."""
        mean = self.mean
        return float(_numpy().std(self.samples) / mean) if mean > 0 else math.nan

    def summary(self) -> dict[str, float | int]:
        """Every statistic, seconds, without the raw samples."""
        return {
            "median_s": self.median, "mean_s": self.mean, "min_s": self.min, "max_s": self.max,
            "p10_s": self.p10, "p90_s": self.p90, "cv": self.cv, "warmup": self.warmup,
            "iterations": self.iterations, "n_buf": self.n_buf,
            "host_overhead_s": self.host_overhead_s,
        }


@dataclass(frozen=True)
class CorrectnessReport:
    """Output vs the float64 reference: NaN/Inf first, then errors against thresholds."""

    nonfinite: int
    max_abs_error: float
    rel_l2_error: float
    atol: float
    rtol_l2: float

    @property
    def passed(self) -> bool:
        return (self.nonfinite == 0 and self.max_abs_error <= self.atol
                and self.rel_l2_error <= self.rtol_l2)


@dataclass(frozen=True)
class RooflineFigures:
    """Work and achieved rates of one timed config against the device's peaks."""

    flops: float
    bytes: float
    arithmetic_intensity: float
    achieved_flops: float  # FLOP/s at the median time
    achieved_bandwidth: float  # B/s at the median time
    peak_flops: float
    peak_bandwidth: float
    attainable_flops: float  # min(peak_flops, AI * peak_bandwidth)
    roofline_fraction: float  # achieved_flops / attainable_flops
    peak_source: str  # "catalog" or "measured"

    @property
    def tflops(self) -> float:
        return self.achieved_flops / 1e12

    @property
    def gbps(self) -> float:
        return self.achieved_bandwidth / 1e9


class TrialStatus(str, enum.Enum):
    """How a trial ended. Only OK trials can ever be "best"."""

    OK = "ok"
    INVALID = "invalid"  # rejected by the family's validator, never built
    COMPILE_ERROR = "compile_error"
    SPILLS = "spills"  # built, but the device's compiler spilled registers: never timed
    LAUNCH_ERROR = "launch_error"
    WRONG_RESULT = "wrong_result"
    TIMEOUT = "timeout"  # the priming launch alone exceeded BenchSettings.launch_timeout_s
    BUILD_TIMEOUT = "build_timeout"  # the build outlived its limit; the worker was killed
    RUN_TIMEOUT = "run_timeout"  # verification or timing outlived its limit; worker killed
    CRASH = "crash"  # the worker process died (a signal, or an exit) mid-trial


@dataclass(frozen=True)
class TrialResult:
    """One config measured (or failed) on one problem: what the harness hands to the store.

    ``config`` is the value the tuner asked for, kept as it is from the tuner to the database;
    the JSON form is made once, where a result leaves the process (:meth:`to_dict`) or is
    stored.
    """

    status: TrialStatus
    config: LauncherConfig
    build_s: float = 0.0
    verify_s: float = 0.0
    bench_s: float = 0.0
    timing: TimingStats | None = None
    correctness: CorrectnessReport | None = None
    roofline: RooflineFigures | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def config_hash(self) -> str:
        """The config's cache key (``LauncherConfig.config_hash``)."""
        return self.config.config_hash()

    @property
    def objective(self) -> float:
        """Median seconds for OK trials, +inf otherwise (resource failures score as inf)."""
        return self.timing.median if self.status is TrialStatus.OK and self.timing else math.inf

    def to_dict(self) -> dict[str, Any]:
        """JSON form (samples included; the config in its JSON form, with its hash)."""
        out: dict[str, Any] = {"status": self.status.value, "config": self.config.to_dict(),
                               "config_hash": self.config_hash}
        out.update((f.name, getattr(self, f.name)) for f in fields(self) if f.name not in out)
        out["extra"] = dict(self.extra)
        if self.timing is not None:
            out["timing"] = {**asdict(self.timing), **self.timing.summary()}
        if self.correctness is not None:
            out["correctness"] = {**asdict(self.correctness), "passed": self.correctness.passed}
        if self.roofline is not None:
            out["roofline"] = {**asdict(self.roofline), "tflops": self.roofline.tflops,
                               "gbps": self.roofline.gbps}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], config: LauncherConfig) -> TrialResult:
        """Inverse of :meth:`to_dict` for the measurement of ``config``, which the receiver
        already holds (it asked for it): the JSON config is not parsed again, only its hash is
        checked. The derived statistics :meth:`to_dict` adds are recomputed, not read.

        Raises:
            ValueError: for an unknown status, or a result of another config than ``config``;
                KeyError/TypeError for missing or unknown fields.
        """
        if data["config_hash"] != config.config_hash():
            raise ValueError(f"a result of config {data['config_hash']!r} was read as one of "
                             f"{config.config_hash()!r}")
        timing, correctness, roofline = (data.get(k) for k in ("timing", "correctness",
                                                               "roofline"))
        return cls(
            status=TrialStatus(data["status"]), config=config, build_s=data["build_s"],
            verify_s=data["verify_s"], bench_s=data["bench_s"],
            timing=None if timing is None else TimingStats(
                samples=tuple(timing["samples"]), warmup=timing["warmup"],
                iterations=timing["iterations"], n_buf=timing["n_buf"],
                host_overhead_s=timing["host_overhead_s"]),
            correctness=None if correctness is None else _fields_of(CorrectnessReport,
                                                                    correctness),
            roofline=None if roofline is None else _fields_of(RooflineFigures, roofline),
            error=data["error"], extra=dict(data["extra"]),
        )


# The stored and served field names of each group, declared once by the dataclasses above: the
# database columns, its records and the API's payloads follow these (tests check they agree).
TIMING_FIELDS: tuple[str, ...] = ("median_s", "mean_s", "min_s", "max_s", "p10_s", "p90_s",
                                  "cv", "warmup", "iterations", "n_buf", "host_overhead_s")
"""The keys of :meth:`TimingStats.summary`."""
ROOFLINE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RooflineFigures))
CORRECTNESS_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CorrectnessReport))


def _fields_of(cls: type[T], data: dict[str, Any]) -> T:
    """A dataclass from a dict that may hold extra derived keys (dropped here)."""
    return cls(**{f.name: data[f.name] for f in fields(cls)})  # type: ignore[call-arg]
