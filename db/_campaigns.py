"""Campaigns in the results database: register one, link device studies, and read a
campaign's progress per study and per worker.

A campaign and its problems are data; its workers and budget slots are coordination
(``db/_slots.py``, behind ``SqlCoordination``), which the progress reads here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from xe2tune.db._campaign_models import (
    Campaign,
    CampaignProblem,
    CampaignSlot,
    CampaignStudy,
    CampaignWorker,
)
from xe2tune.db._convert import aware, problem_spec
from xe2tune.db._models import Device, Lease, Problem, utcnow
from xe2tune.db._reads import studies
from xe2tune.db._records import StudyRecord
from xe2tune.db._writes import upsert_problem
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.orm import Session

    from xe2tune.db._sql_store import SqlResultStore
    from xe2tune.kernels import ProblemSpec


@dataclass(frozen=True)
class CampaignRecord:
    """A campaign: its problems, in order, and the budget of each of their studies."""

    id: int
    name: str
    sampler: str
    trials: int
    patience: int | None
    confirm_rounds: int
    created_at: datetime
    problems: tuple[ProblemSpec, ...]


@dataclass(frozen=True)
class CampaignStudyStatus:
    """One device's study of a campaign problem: trial slots done and running, the budget,
    why it closed early (None: it runs to its budget) and whether its confirmation ran."""

    id: int
    study: StudyRecord
    done: int
    running: int
    budget: int
    closed: str | None
    confirmed: bool

    @property
    def finished(self) -> bool:
        """Nothing left to run: the budget (or an early close) and the confirmation are done."""
        return (self.closed is not None or self.done >= self.budget) and self.confirmed


@dataclass(frozen=True)
class CampaignWorkerStatus:
    """A worker that joined the campaign; alive while its lease is."""

    owner: str
    host: str
    pid: int
    device: str
    driver: str
    compute_units: int
    started_at: datetime
    finished_at: datetime | None
    last_heartbeat: datetime | None
    alive: bool
    trials_done: int


@dataclass(frozen=True)
class CampaignStatus:
    """A campaign's progress: every study of every device it runs on, and its workers (those
    on the database and those behind the gRPC proxy alike); ``remote_studies`` are the studies
    gRPC workers run (RemoteStudyStatus of db/_campaign_remote.py)."""

    campaign: CampaignRecord
    studies: tuple[CampaignStudyStatus, ...]
    workers: tuple[CampaignWorkerStatus, ...]
    remote_studies: tuple[Any, ...] = ()


# -- repository functions: each takes a Session inside a transaction and never commits --------


def create_campaign(session: Session, *, name: str, sampler: str, trials: int,
                    patience: int | None, confirm_rounds: int,
                    problems: Sequence[ProblemSpec]) -> int:
    """Register a campaign and its problems; return its id.

    Raises:
        StoreError: the name is taken.
    """
    taken = session.scalar(select(Campaign.id).where(Campaign.name == name))
    if taken is not None:
        raise StoreError(f"campaign name {name!r} is taken (campaign {taken}); accepted: a new "
                         f"name, or `xe2tune worker --campaign {taken}` to run that one")
    row = Campaign(name=name, sampler=sampler, trials=trials, patience=patience,
                   confirm_rounds=confirm_rounds)
    session.add(row)
    session.flush()
    for position, problem in enumerate(dict.fromkeys(problems)):
        session.add(CampaignProblem(campaign_id=row.id, position=position,
                                    problem_id=upsert_problem(session, problem)))
    return row.id


def campaigns(session: Session, campaign_id: int | None = None) -> list[CampaignRecord]:
    """Every campaign (or the one with this id), oldest first."""
    stmt = select(Campaign).order_by(Campaign.id)
    if campaign_id is not None:
        stmt = stmt.where(Campaign.id == campaign_id)
    found = list(session.scalars(stmt))
    problems: dict[int, list[ProblemSpec]] = {c.id: [] for c in found}
    rows = session.execute(
        select(CampaignProblem.campaign_id, Problem)
        .join(Problem, Problem.id == CampaignProblem.problem_id)
        .where(CampaignProblem.campaign_id.in_(list(problems)))
        .order_by(CampaignProblem.campaign_id, CampaignProblem.position))
    for campaign_id_, problem in rows:
        problems[campaign_id_].append(problem_spec(problem))
    return [CampaignRecord(id=c.id, name=c.name, sampler=c.sampler, trials=c.trials,
                           patience=c.patience, confirm_rounds=c.confirm_rounds,
                           created_at=aware(c.created_at), problems=tuple(problems[c.id]))
            for c in found]


def link_study(session: Session, campaign_id: int, study_id: int) -> int:
    """The campaign study of ``study_id``, created by the first worker on its device."""
    found = session.scalar(select(CampaignStudy.id).where(
        CampaignStudy.campaign_id == campaign_id, CampaignStudy.study_id == study_id))
    if found is not None:
        return found
    return session.execute(insert(CampaignStudy).values(
        campaign_id=campaign_id, study_id=study_id, created_at=utcnow())
        .returning(CampaignStudy.id)).scalar_one()


def campaign_status(session: Session, campaign: CampaignRecord) -> CampaignStatus:
    """Progress of every study of the campaign and every worker that joined it."""
    now = utcnow()
    links = session.execute(select(CampaignStudy).where(
        CampaignStudy.campaign_id == campaign.id).order_by(CampaignStudy.id)).scalars().all()
    records = {s.id: s for s in studies(session)} if links else {}
    live = select(Lease.owner).where(Lease.expires_at > now)
    counts = dict(session.execute(
        select(CampaignSlot.campaign_study_id, func.count())
        .where(CampaignSlot.slot < campaign.trials, CampaignSlot.done.is_(True))
        .group_by(CampaignSlot.campaign_study_id)).all())
    running = dict(session.execute(
        select(CampaignSlot.campaign_study_id, func.count())
        .where(CampaignSlot.done.is_(False), CampaignSlot.owner.in_(live))
        .group_by(CampaignSlot.campaign_study_id)).all())
    confirmed = set(session.scalars(select(CampaignSlot.campaign_study_id).where(
        CampaignSlot.slot == campaign.trials, CampaignSlot.done.is_(True))))
    study_rows = tuple(
        CampaignStudyStatus(id=link.id, study=records[link.study_id],
                            done=counts.get(link.id, 0), running=running.get(link.id, 0),
                            budget=campaign.trials, closed=link.closed,
                            confirmed=link.id in confirmed)
        for link in links)
    done_by = dict(session.execute(
        select(CampaignSlot.owner, func.count())
        .join(CampaignStudy, CampaignStudy.id == CampaignSlot.campaign_study_id)
        .where(CampaignStudy.campaign_id == campaign.id, CampaignSlot.done.is_(True),
               CampaignSlot.slot < campaign.trials)
        .group_by(CampaignSlot.owner)).all())
    workers = tuple(
        CampaignWorkerStatus(
            owner=w.owner, host=w.host, pid=w.pid, device=name, driver=driver,
            compute_units=units, started_at=aware(w.started_at),
            finished_at=aware(w.finished_at) if w.finished_at else None,
            # the lease's last heartbeat; once the lease is gone, the last slot it touched
            last_heartbeat=aware(renewed or w.seen_at) if renewed or w.seen_at else None,
            alive=expires is not None and expires > now and w.finished_at is None,
            trials_done=done_by.get(w.owner, 0))
        for w, name, driver, units, renewed, expires in session.execute(
            select(CampaignWorker, Device.name, Device.driver, Device.compute_units,
                   Lease.renewed_at, Lease.expires_at)
            .join(Device, Device.id == CampaignWorker.device_id)
            .outerjoin(Lease, Lease.owner == CampaignWorker.owner)
            .where(CampaignWorker.campaign_id == campaign.id)
            .order_by(CampaignWorker.started_at)))
    return CampaignStatus(campaign=campaign, studies=study_rows, workers=workers)


# -- the store's face for campaigns ------------------------------------------------------------


class CampaignStore:
    """Campaign reads and writes on a results store, in its transactions.

    One transaction per call, in the store's transactions (every database error a StoreError
    naming the database). Who works on a campaign study (workers, budget slots) is coordination:
    ``xe2tune.db.SqlCoordination``.
    """

    def __init__(self, store: SqlResultStore) -> None:
        self._store = store
        self._transactions = store.transactions

    def create(self, *, name: str, sampler: str, trials: int, patience: int | None,
               confirm_rounds: int, problems: Sequence[ProblemSpec]) -> CampaignRecord:
        """Register a campaign; see :func:`create_campaign`.

        Raises:
            StoreError: the name is taken, or the database failed.
        """
        try:
            campaign_id = self._transactions.write(lambda s: create_campaign(
                s, name=name, sampler=sampler, trials=trials, patience=patience,
                confirm_rounds=confirm_rounds, problems=problems))
        except StoreError as exc:
            if not isinstance(exc.__cause__, IntegrityError):
                raise
            raise StoreError(f"campaign name {name!r} is taken; accepted: a new name") from None
        return self.get(campaign_id)

    def list(self) -> list[CampaignRecord]:
        """Every campaign, oldest first."""
        with self._transactions.read() as session:
            return campaigns(session)

    def get(self, campaign_id: int) -> CampaignRecord:
        """The campaign with this id.

        Raises:
            StoreError: there is none (the message lists the campaigns there are).
        """
        with self._transactions.read() as session:
            found = campaigns(session, campaign_id)
            if found:
                return found[0]
            known = ", ".join(f"{c.id} ({c.name})" for c in campaigns(session)[:10])
        raise StoreError(f"no campaign {campaign_id} in {self._store.url}; accepted: "
                         + (known or "none yet, create one with `xe2tune campaign create`"))

    def status(self, campaign_id: int, *, remote: bool = True) -> CampaignStatus:
        """Progress per study and per worker (see :func:`campaign_status`), with ``remote``
        gRPC workers and their studies too (read from the optuna storage they share with this
        database)."""
        campaign = self.get(campaign_id)
        with self._transactions.read() as session:
            local = campaign_status(session, campaign)
            shared = inspect(session.get_bind()).has_table("version_info")  # optuna's tables
        if not (remote and shared):  # no optuna storage here: nobody ran a gRPC worker
            return local
        import optuna  # the read side loads optuna only for a campaign's gRPC workers

        from xe2tune.db._campaign_remote import remote_progress

        storage = optuna.storages.RDBStorage(
            self._store.optuna_storage_url(), engine_kwargs=self._store.optuna_engine_kwargs(),
            skip_table_creation=True)
        try:
            remote_studies, remote_workers = remote_progress(storage, campaign.id)
        finally:
            storage.remove_session()
            storage.engine.dispose()
        return replace(local, remote_studies=remote_studies,
                       workers=local.workers + remote_workers)

    def link_study(self, campaign_id: int, study_id: int) -> int:
        """The campaign study id of a device's study, linked on first use."""
        return self._transactions.write(lambda s: link_study(s, campaign_id, study_id))
