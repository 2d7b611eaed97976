"""Conversions between the harness's results, the ORM rows and the public records."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from xe2tune.db._models import Device, Measurement, Problem, Trial
from xe2tune.db._records import DeviceRecord, MeasurementRecord, TrialRow
from xe2tune.errors import InvalidConfig, StoreError
from xe2tune.kernels import LauncherConfig, ProblemSpec
from xe2tune.measurement import (
    CORRECTNESS_FIELDS,
    ROOFLINE_FIELDS,
    TIMING_FIELDS,
    TrialStatus,
)

if TYPE_CHECKING:
    from xe2tune.measurement import TrialResult

# a measurement row's columns: the harness's records, flattened (TimingStats as its summary)
SUMMARY_FIELDS = (*TIMING_FIELDS, *ROOFLINE_FIELDS, *CORRECTNESS_FIELDS, "passed")


def aware(moment: datetime) -> datetime:
    """Stored naive UTC as an aware UTC datetime."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def measurement_row(result: TrialResult) -> Measurement | None:
    """The measurement row of a result, None when the trial produced neither output nor time."""
    if result.timing is None and result.correctness is None and result.roofline is None:
        return None
    row = Measurement()
    if result.timing is not None:
        for name, value in result.timing.summary().items():
            setattr(row, name, value)
        row.samples = list(result.timing.samples)
    if result.roofline is not None:
        for name in ROOFLINE_FIELDS:
            setattr(row, name, getattr(result.roofline, name))
    if result.correctness is not None:
        for name in CORRECTNESS_FIELDS:
            setattr(row, name, getattr(result.correctness, name))
        row.passed = result.correctness.passed
    return row


def measurement_record(row: Measurement | None, *, samples: bool) -> MeasurementRecord | None:
    """A measurement row as a record; raw samples only when asked (they can be large)."""
    if row is None:
        return None
    values = {name: getattr(row, name) for name in SUMMARY_FIELDS}
    if samples and row.samples is not None:
        values["samples"] = tuple(row.samples)
    return MeasurementRecord(**values)


def stored_config(config: dict[str, Any], trial_id: int) -> LauncherConfig:
    """A trial's stored config (its ``to_dict`` form) as the kernels' value object.

    The one place a stored config is parsed: the records that carry one are made from this, so
    no reader parses it again. Both write paths store a ``LauncherConfig``'s own form, so a row
    that does not parse was written by something else.

    Raises:
        StoreError: the stored JSON is not a launcher config.
    """
    try:
        return LauncherConfig.from_dict(config)
    except InvalidConfig as exc:
        raise StoreError(f"trial {trial_id}: the stored config is not a launcher config "
                         f"({exc.reason})") from exc


def problem_spec(row: Problem) -> ProblemSpec:
    """A problem row as the kernels' value object."""
    return ProblemSpec(
        mode=row.mode, head_dim=row.head_dim, dtype=row.dtype, q_len=row.q_len,
        kv_len=row.kv_len, heads_q=row.heads_q, heads_kv=row.heads_kv, batch=row.batch,
        causal=row.causal, head_dim_v=row.head_dim_v, kv_dtype=row.kv_dtype,
    )


def device_record(row: Device) -> DeviceRecord:
    """A device row as a record."""
    return DeviceRecord(
        id=row.id, name=row.name, backend=row.backend, device_type=row.device_type,
        driver=row.driver, compute_units=row.compute_units,
        global_mem_bytes=row.global_mem_bytes, local_mem_bytes=row.local_mem_bytes,
        max_work_group_size=row.max_work_group_size,
        sub_group_sizes=tuple(row.sub_group_sizes), peak_flops=dict(row.peak_flops),
        peak_bandwidth=row.peak_bandwidth, peak_source=row.peak_source,
    )


def trial_row(row: Trial, *, samples: bool) -> TrialRow:
    """A trial row and its measurement as a record."""
    return TrialRow(
        id=row.id, study_id=row.study_id, number=row.number,
        config=stored_config(row.config, row.id), config_hash=row.config_hash,
        family=row.family, baseline=row.baseline,
        status=TrialStatus(row.status), is_default=row.is_default,
        origin=row.origin, build_s=row.build_s, verify_s=row.verify_s,
        bench_s=row.bench_s, error=row.error, created_at=aware(row.created_at),
        measurement=measurement_record(row.measurement, samples=samples), extra=dict(row.extra),
    )

