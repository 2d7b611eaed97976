"""ORM models of the xe2t_* tables. The schema itself is created and changed only by migrations.

Every table is prefixed ``xe2t_`` because optuna's tables (``studies``, ``trials``, ...) live in
the same database; the Alembic env ignores every table without the prefix.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

TABLE_PREFIX = "xe2t_"

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Naive UTC now: SQLite keeps no time zone, so every timestamp is stored as naive UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    """Declarative base with a naming convention, so migrations name constraints stably."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Meta(Base):
    """Key/value counters; ``data_version`` is bumped by every write transaction."""

    __tablename__ = "xe2t_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger)


class Device(Base):
    """A device, identified by (name, backend, driver, compute units), with the peaks used for its
    rooflines. Two parts that differ only in compute units (a cut-down SKU) tune apart."""

    __tablename__ = "xe2t_devices"
    __table_args__ = (UniqueConstraint("name", "backend", "driver", "compute_units"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    backend: Mapped[str] = mapped_column(String(64))
    device_type: Mapped[str] = mapped_column(String(32))
    driver: Mapped[str] = mapped_column(String(128))
    compute_units: Mapped[int] = mapped_column(Integer)
    global_mem_bytes: Mapped[int] = mapped_column(BigInteger)
    local_mem_bytes: Mapped[int] = mapped_column(BigInteger)
    max_work_group_size: Mapped[int] = mapped_column(Integer)
    sub_group_sizes: Mapped[list[int]] = mapped_column(JSON)
    peak_flops: Mapped[dict[str, float]] = mapped_column(JSON)
    peak_bandwidth: Mapped[float | None] = mapped_column(Float)
    peak_source: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Ceiling(Base):
    """Measured FMA/copy ceilings of a device: one row per device, the latest measurement."""

    __tablename__ = "xe2t_ceilings"

    device_id: Mapped[int] = mapped_column(
        ForeignKey("xe2t_devices.id", ondelete="CASCADE"), primary_key=True
    )
    flops: Mapped[dict[str, float]] = mapped_column(JSON)
    bandwidth: Mapped[float] = mapped_column(Float)
    llc_bytes: Mapped[int] = mapped_column(BigInteger)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    measured_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class KernelSource(Base):
    """One version of a kernel family's source."""

    __tablename__ = "xe2t_kernel_sources"
    __table_args__ = (UniqueConstraint("family", "source_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    family: Mapped[str] = mapped_column(String(128))
    source_hash: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Problem(Base):
    """One attention problem; ``key`` is ``ProblemSpec.key()`` and unique.

    ``head_dim_v`` is always stored (equal to ``head_dim`` unless latent attention) so a lookup
    compares columns; ``kv_dtype`` is NULL when K/V are stored in ``dtype``.
    """

    __tablename__ = "xe2t_problems"
    __table_args__ = (Index("ix_xe2t_problems_lookup", "mode", "head_dim", "dtype", "causal"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(512), unique=True)
    mode: Mapped[str] = mapped_column(String(16))
    head_dim: Mapped[int] = mapped_column(Integer)
    dtype: Mapped[str] = mapped_column(String(16))
    q_len: Mapped[int] = mapped_column(Integer)
    kv_len: Mapped[int] = mapped_column(Integer)
    heads_q: Mapped[int] = mapped_column(Integer)
    heads_kv: Mapped[int] = mapped_column(Integer)
    batch: Mapped[int] = mapped_column(Integer)
    causal: Mapped[bool] = mapped_column(Boolean)
    head_dim_v: Mapped[int] = mapped_column(Integer)
    kv_dtype: Mapped[str | None] = mapped_column(String(16), nullable=True)


class Study(Base):
    """One tuning study per (device, kernel source, problem), paired with an optuna study."""

    __tablename__ = "xe2t_studies"
    __table_args__ = (UniqueConstraint("device_id", "kernel_source_id", "problem_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("xe2t_devices.id"))
    kernel_source_id: Mapped[int] = mapped_column(ForeignKey("xe2t_kernel_sources.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("xe2t_problems.id"), index=True)
    sampler: Mapped[str] = mapped_column(String(64))
    optuna_study_name: Mapped[str | None] = mapped_column(String(512), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # the data_version of the last write that added results (trials, measurements,
    # confirmation rounds) of this study: readers re-read only what changed
    results_version: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0",
                                                 index=True)

    device: Mapped[Device] = relationship()
    kernel_source: Mapped[KernelSource] = relationship()
    problem: Mapped[Problem] = relationship()


class Trial(Base):
    """One config tried in a study: never two rows for the same config hash in a study.

    ``family`` is the config's kernel family (a study may span several); ``baseline`` is the
    label of a seeded baseline config (e.g. "seed 000 SageV1"), None for tuned configs.
    """

    __tablename__ = "xe2t_trials"
    __table_args__ = (
        UniqueConstraint("study_id", "config_hash"),
        Index("ix_xe2t_trials_study_status", "study_id", "status"),
        Index("ix_xe2t_trials_family_status", "family", "status"),
        Index("ix_xe2t_trials_study_baseline", "study_id", "baseline"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("xe2t_studies.id", ondelete="CASCADE"))
    number: Mapped[int | None] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_hash: Mapped[str] = mapped_column(String(64))
    family: Mapped[str] = mapped_column(String(128))
    baseline: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32))
    is_default: Mapped[bool] = mapped_column(Boolean)
    origin: Mapped[str] = mapped_column(String(16))
    build_s: Mapped[float] = mapped_column(Float)
    verify_s: Mapped[float] = mapped_column(Float)
    bench_s: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, server_default=text("'{}'"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    study: Mapped[Study] = relationship()
    measurement: Mapped[Measurement | None] = relationship(
        back_populates="trial", cascade="all, delete-orphan"
    )


class Measurement(Base):
    """What the harness measured for one trial (1:1); each group is NULL when not reached."""

    __tablename__ = "xe2t_measurements"

    trial_id: Mapped[int] = mapped_column(
        ForeignKey("xe2t_trials.id", ondelete="CASCADE"), primary_key=True
    )
    median_s: Mapped[float | None] = mapped_column(Float)
    mean_s: Mapped[float | None] = mapped_column(Float)
    min_s: Mapped[float | None] = mapped_column(Float)
    max_s: Mapped[float | None] = mapped_column(Float)
    p10_s: Mapped[float | None] = mapped_column(Float)
    p90_s: Mapped[float | None] = mapped_column(Float)
    cv: Mapped[float | None] = mapped_column(Float)
    warmup: Mapped[int | None] = mapped_column(Integer)
    iterations: Mapped[int | None] = mapped_column(Integer)
    n_buf: Mapped[int | None] = mapped_column(Integer)
    host_overhead_s: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[list[float] | None] = mapped_column(JSON)
    flops: Mapped[float | None] = mapped_column(Float)
    bytes: Mapped[float | None] = mapped_column(Float)
    arithmetic_intensity: Mapped[float | None] = mapped_column(Float)
    achieved_flops: Mapped[float | None] = mapped_column(Float)
    achieved_bandwidth: Mapped[float | None] = mapped_column(Float)
    peak_flops: Mapped[float | None] = mapped_column(Float)
    peak_bandwidth: Mapped[float | None] = mapped_column(Float)
    attainable_flops: Mapped[float | None] = mapped_column(Float)
    roofline_fraction: Mapped[float | None] = mapped_column(Float)
    peak_source: Mapped[str | None] = mapped_column(String(16))
    nonfinite: Mapped[int | None] = mapped_column(Integer)
    max_abs_error: Mapped[float | None] = mapped_column(Float)
    rel_l2_error: Mapped[float | None] = mapped_column(Float)
    atol: Mapped[float | None] = mapped_column(Float)
    rtol_l2: Mapped[float | None] = mapped_column(Float)
    passed: Mapped[bool | None] = mapped_column(Boolean)

    trial: Mapped[Trial] = relationship(back_populates="measurement")


class Lease(Base):
    """A running search process: its reservations live while ``expires_at`` is renewed.

    ``host`` and ``pid`` let a process on the same host tell at once that a holder was killed.
    """

    __tablename__ = "xe2t_leases"

    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[datetime] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    renewed_at: Mapped[datetime | None] = mapped_column(DateTime)  # the last heartbeat


class Reservation(Base):
    """A config a search is measuring: one holder per (study, config hash) at a time."""

    __tablename__ = "xe2t_reservations"
    __table_args__ = (UniqueConstraint("study_id", "config_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("xe2t_studies.id", ondelete="CASCADE"))
    config_hash: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(ForeignKey("xe2t_leases.owner", ondelete="CASCADE"),
                                       index=True)
    trial_number: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Confirmation(Base):
    """A confirmation round: the study's top configs, default and baselines timed side by side.

    ``entries`` lists every config of the round (trial id, role, label, pooled median and the
    per-round medians); the study's served best and speedups come from its newest round.
    """

    __tablename__ = "xe2t_confirmations"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("xe2t_studies.id", ondelete="CASCADE"),
                                          index=True)
    rounds: Mapped[int] = mapped_column(Integer)
    best_trial_id: Mapped[int] = mapped_column(ForeignKey("xe2t_trials.id", ondelete="CASCADE"))
    best_median_s: Mapped[float] = mapped_column(Float)
    default_median_s: Mapped[float | None] = mapped_column(Float)
    entries: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
