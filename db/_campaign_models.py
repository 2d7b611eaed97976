"""ORM models of campaigns: problems with budgets, tuned by many workers on many devices.

A campaign names problems and a budget per study; it is not tied to a device. The first worker
on a device creates that device's study of each problem (the ordinary ``xe2t_studies`` row, so
``best``, the API and the dashboard see campaign results like any other) and links it here;
workers on an identical device (same store device row: name, backend, driver, compute units)
join it. A study's budget is cut into slots: a worker holds a slot while one trial runs and
marks it done when the trial is told, so the budget is spent exactly however many workers share
the study. Slot ``trials`` (one past the last trial slot) is the study's confirmation round.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from xe2tune.db._models import Base, utcnow


class Campaign(Base):
    """Problems and the budget of each of their studies, on every device it is run on."""

    __tablename__ = "xe2t_campaigns"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    sampler: Mapped[str] = mapped_column(String(64))
    trials: Mapped[int] = mapped_column(Integer)
    patience: Mapped[int | None] = mapped_column(Integer)
    confirm_rounds: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CampaignProblem(Base):
    """A problem of a campaign; ``position`` orders them as they were given."""

    __tablename__ = "xe2t_campaign_problems"
    __table_args__ = (UniqueConstraint("campaign_id", "problem_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("xe2t_campaigns.id", ondelete="CASCADE"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("xe2t_problems.id"))
    position: Mapped[int] = mapped_column(Integer)


class CampaignStudy(Base):
    """The study of one campaign problem on one device; ``closed`` says why it ended before
    its budget (patience, every valid config tried), None while the budget rules."""

    __tablename__ = "xe2t_campaign_studies"
    __table_args__ = (UniqueConstraint("campaign_id", "study_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("xe2t_campaigns.id", ondelete="CASCADE"))
    study_id: Mapped[int] = mapped_column(ForeignKey("xe2t_studies.id", ondelete="CASCADE"))
    closed: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class CampaignSlot(Base):
    """One unit of a campaign study's budget, held by a worker (``owner``, its lease) while its
    trial runs, ``done`` once the trial is told. A held slot whose owner's lease is gone is
    free again; done slots outlive their worker."""

    __tablename__ = "xe2t_campaign_slots"
    __table_args__ = (UniqueConstraint("campaign_study_id", "slot"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_study_id: Mapped[int] = mapped_column(
        ForeignKey("xe2t_campaign_studies.id", ondelete="CASCADE"))
    slot: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(64), index=True)
    trial_number: Mapped[int | None] = mapped_column(Integer)
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    claimed_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    done_at: Mapped[datetime | None] = mapped_column(DateTime)


class CampaignWorker(Base):
    """A worker process that joined a campaign: where it runs and on which device."""

    __tablename__ = "xe2t_campaign_workers"

    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("xe2t_campaigns.id", ondelete="CASCADE"), index=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("xe2t_devices.id"))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    seen_at: Mapped[datetime | None] = mapped_column(DateTime)  # its last slot claimed or done
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)


class WorkerToken(Base):
    """A credential minted for a campaign's remote workers: only its sha256 is stored (tokens
    are 256 random bits, so a fast hash loses nothing), shown once when minted. A revoked token
    stays, so that its use is refused as revoked rather than unknown."""

    __tablename__ = "xe2t_worker_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(
        ForeignKey("xe2t_campaigns.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(128))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)
