"""Repository functions that read: devices, studies, trials and filtered result listings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, Text, case, cast, func, select
from sqlalchemy.orm import selectinload

from xe2tune.db._convert import (
    SUMMARY_FIELDS,
    aware,
    device_record,
    measurement_record,
    problem_spec,
    stored_config,
    trial_row,
)
from xe2tune.db._models import (
    Ceiling,
    Device,
    KernelSource,
    Measurement,
    Meta,
    Problem,
    Study,
    Trial,
)
from xe2tune.db._records import MeasuredCeilings, ResultRow, StudyRecord
from xe2tune.db._writes import DATA_VERSION
from xe2tune.errors import StoreError
from xe2tune.measurement import TrialStatus

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sqlalchemy.orm import Session

    from xe2tune.db._records import DeviceRecord, ResultFilters, TrialRow
    from xe2tune.kernels import LauncherConfig


def data_version(session: Session) -> int:
    """The change counter (0 before the first migration that created it)."""
    return session.scalar(select(Meta.value).where(Meta.key == DATA_VERSION)) or 0


def device_ids(session: Session, device: str | None) -> list[int] | None:
    """Ids of the devices a filter names (an id, or a name case-insensitively); None = all.

    Raises:
        StoreError: nothing matches; the message lists the known devices.
    """
    if device is None:
        return None
    condition = func.lower(Device.name) == device.strip().lower()
    if device.strip().isdigit():
        condition = condition | (Device.id == int(device))
    ids = list(session.scalars(select(Device.id).where(condition).order_by(Device.id)))
    if not ids:
        known = sorted(set(session.scalars(select(Device.name))))
        raise StoreError(f"no device {device!r} in the database; known: "
                         + (", ".join(known) if known else "none (nothing tuned yet)"))
    return ids


def devices(session: Session) -> list[DeviceRecord]:
    """Every device, oldest first."""
    return [device_record(row) for row in session.scalars(select(Device).order_by(Device.id))]


def ceilings(session: Session, device_id: int) -> MeasuredCeilings | None:
    """The device's measured ceilings, if any."""
    row = session.get(Ceiling, device_id)
    if row is None:
        return None
    return MeasuredCeilings(flops=dict(row.flops), bandwidth=row.bandwidth,
                            llc_bytes=row.llc_bytes, measured_at=aware(row.measured_at),
                            details=dict(row.details))


def studies(session: Session, ids: list[int] | None = None,
            study_id: int | None = None) -> list[StudyRecord]:
    """Studies with their trial counts and best OK median, oldest first."""
    ok = Trial.status == TrialStatus.OK.value
    counts = (
        select(Trial.study_id, func.count(Trial.id).label("n"),
               func.sum(case((ok, 1), else_=0)).label("n_ok"),
               func.min(case((ok, Measurement.median_s))).label("best"))
        .outerjoin(Measurement, Measurement.trial_id == Trial.id)
        .group_by(Trial.study_id).subquery()
    )
    stmt = (
        select(Study, Device.name, KernelSource, Problem, counts.c.n, counts.c.n_ok,
               counts.c.best)
        .join(Device, Device.id == Study.device_id)
        .join(KernelSource, KernelSource.id == Study.kernel_source_id)
        .join(Problem, Problem.id == Study.problem_id)
        .outerjoin(counts, counts.c.study_id == Study.id)
        .order_by(Study.id)
    )
    if ids is not None:
        stmt = stmt.where(Study.device_id.in_(ids))
    if study_id is not None:
        stmt = stmt.where(Study.id == study_id)
    return [
        StudyRecord(
            id=study.id, device_id=study.device_id, device_name=name,
            kernel_source_id=source.id, family=source.family, source_hash=source.source_hash,
            problem_id=problem.id, problem=problem_spec(problem), sampler=study.sampler,
            optuna_study_name=study.optuna_study_name, created_at=aware(study.created_at),
            n_trials=n or 0, n_ok=n_ok or 0, best_median_s=best,
        )
        for study, name, source, problem, n, n_ok, best in session.execute(stmt)
    ]


def trials(session: Session, study_id: int) -> list[TrialRow]:
    """Every trial of a study with its measurement and samples, in the order stored."""
    stmt = (select(Trial).where(Trial.study_id == study_id)
            .options(selectinload(Trial.measurement)).order_by(Trial.id))
    return [trial_row(row, samples=True) for row in session.scalars(stmt)]


def _filtered(stmt: Select[Any], filters: ResultFilters | None, ids: list[int] | None) -> Select:
    if ids is not None:
        stmt = stmt.where(Study.device_id.in_(ids))
    if filters is None:
        return stmt
    equal = {Problem.mode: filters.mode, Problem.head_dim: filters.head_dim,
             Problem.head_dim_v: filters.head_dim_v, Problem.kv_dtype: filters.kv_dtype,
             Problem.dtype: filters.dtype, Problem.causal: filters.causal,
             Trial.family: filters.family, Trial.study_id: filters.study_id,
             Trial.status: filters.status.value if filters.status else None}
    for column, value in equal.items():
        if value is not None:
            stmt = stmt.where(column == value)
    if filters.seq_min is not None:
        stmt = stmt.where(Problem.kv_len >= filters.seq_min)
    if filters.seq_max is not None:
        stmt = stmt.where(Problem.kv_len <= filters.seq_max)
    return stmt


def _joined(*entities: Any) -> Select[Any]:
    return (
        select(*entities)
        .join(Study, Study.id == Trial.study_id)
        .join(Device, Device.id == Study.device_id)
        .join(KernelSource, KernelSource.id == Study.kernel_source_id)
        .join(Problem, Problem.id == Study.problem_id)
        .outerjoin(Measurement, Measurement.trial_id == Trial.id)
    )


def results(session: Session, filters: ResultFilters | None, ids: list[int] | None, *,
            limit: int | None, offset: int) -> list[ResultRow]:
    """Trials with everything they refer to, newest first."""
    stmt = _filtered(_joined(Trial, Measurement, Device, KernelSource, Problem),
                     filters, ids).order_by(Trial.id.desc()).offset(offset).limit(limit)
    # A page repeats few configs (a search measures each on many problems): each is parsed
    # once, by its hash, which both write paths store with it (submissions have it checked).
    configs: dict[str, LauncherConfig] = {}

    def config(trial: Trial) -> LauncherConfig:
        if trial.config_hash not in configs:
            configs[trial.config_hash] = stored_config(trial.config, trial.id)
        return configs[trial.config_hash]

    return [
        ResultRow(
            trial_id=trial.id, study_id=trial.study_id, created_at=aware(trial.created_at),
            device_id=device.id, device=device.name, family=trial.family,
            source_hash=source.source_hash, problem_id=problem.id,
            problem=problem_spec(problem), config=config(trial),
            config_hash=trial.config_hash, baseline=trial.baseline,
            is_default=trial.is_default, origin=trial.origin,
            status=TrialStatus(trial.status), build_s=trial.build_s, verify_s=trial.verify_s,
            bench_s=trial.bench_s, error=trial.error,
            measurement=measurement_record(measurement, samples=False),
        )
        for trial, measurement, device, source, problem in session.execute(stmt)
    ]


def count_results(session: Session, filters: ResultFilters | None, ids: list[int] | None) -> int:
    """How many trials match."""
    return session.scalar(_filtered(_joined(func.count(Trial.id)), filters, ids)) or 0


FRAME_COLUMNS: dict[str, Any] = {
    "trial_id": Trial.id, "created_at": Trial.created_at, "device": Device.name,
    "device_id": Device.id, "family": Trial.family, "baseline": Trial.baseline,
    "source_hash": KernelSource.source_hash, "study_id": Trial.study_id, "number": Trial.number,
    "mode": Problem.mode, "head_dim": Problem.head_dim, "head_dim_v": Problem.head_dim_v,
    "dtype": Problem.dtype, "kv_dtype": Problem.kv_dtype,
    "q_len": Problem.q_len, "kv_len": Problem.kv_len, "heads_q": Problem.heads_q,
    "heads_kv": Problem.heads_kv, "batch": Problem.batch, "causal": Problem.causal,
    # raw JSON text: a cast, since psycopg decodes a PostgreSQL json column whatever the type
    "config_hash": Trial.config_hash, "config": cast(Trial.config, Text),
    "is_default": Trial.is_default,
    "origin": Trial.origin, "status": Trial.status, "build_s": Trial.build_s,
    "verify_s": Trial.verify_s, "bench_s": Trial.bench_s, "error": Trial.error,
    **{name: getattr(Measurement, name) for name in SUMMARY_FIELDS},
}


def _frame_statement(filters: ResultFilters | None, ids: list[int] | None) -> Select[Any]:
    return _filtered(_joined(*FRAME_COLUMNS.values()), filters, ids).order_by(Trial.id.desc())


def result_tuples(session: Session, filters: ResultFilters | None,
                  ids: list[int] | None) -> list[tuple[Any, ...]]:
    """The raw columns of ``FRAME_COLUMNS`` for every matching trial, newest first.

    Run on the session's connection (Core rows, no ORM loading): this feeds tables of 10^5 rows.
    Plain tuples, because pandas mistakes a Row with a ``dtype`` column for an array.
    """
    return [tuple(row) for row in session.connection().execute(_frame_statement(filters, ids))]


def result_tuple_chunks(session: Session, filters: ResultFilters | None, ids: list[int] | None,
                        *, limit: int | None, chunk_rows: int) -> Iterator[list[tuple[Any, ...]]]:
    """:func:`result_tuples` (the newest ``limit`` only), ``chunk_rows`` at a time.

    ``yield_per`` fetches from the cursor as the chunks are consumed (a server-side cursor on
    PostgreSQL, SQLite steps its statement), so memory stays bounded whatever the table size.
    """
    stmt = _frame_statement(filters, ids).limit(limit)
    result = session.connection().execution_options(yield_per=chunk_rows).execute(stmt)
    for part in result.partitions():
        yield [tuple(row) for row in part]


def check_page(limit: int, offset: int) -> None:
    """Reject a page that cannot be served."""
    if limit < 1 or offset < 0:
        raise StoreError(f"limit must be >= 1 and offset >= 0, got limit={limit}, "
                         f"offset={offset}")
