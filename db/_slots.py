"""Repository functions for a campaign's workers and budget slots (who runs which trial of a
study's budget).

Coordination, written with Core statements (no ``data_version`` bump, as leases and
reservations). Claiming a slot locks its campaign study's row (``SELECT ... FOR UPDATE`` on
PostgreSQL; SQLite's write transactions are serialized already), so two workers never take one
slot and a budget is never overspent. Every function takes a Session inside a transaction and
never commits.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import delete, func, insert, select, update

from xe2tune.db._campaign_models import CampaignSlot, CampaignStudy, CampaignWorker
from xe2tune.db._models import Lease, utcnow
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def join_campaign(session: Session, campaign_id: int, *, owner: str, device_id: int,
                  host: str, pid: int) -> None:
    """Record a worker (its lease's owner id) as one of the campaign's."""
    session.execute(insert(CampaignWorker).values(
        owner=owner, campaign_id=campaign_id, device_id=device_id, host=host, pid=pid,
        started_at=utcnow()))


def leave_campaign(session: Session, owner: str) -> None:
    """Mark the worker finished."""
    session.execute(update(CampaignWorker).where(CampaignWorker.owner == owner)
                    .values(finished_at=utcnow()))


def _seen(session: Session, owner: str, now: datetime) -> None:
    session.execute(update(CampaignWorker).where(CampaignWorker.owner == owner)
                    .values(seen_at=now))


def claim_slot(session: Session, campaign_study_id: int, budget: int, owner: str, *,
               confirmation: bool = False) -> int | None:
    """Take the lowest trial slot (0 .. budget - 1) nobody holds nor finished, or with
    ``confirmation`` the confirmation slot (``budget``) once every trial slot is done or the
    study closed early; None when there is none to take.

    A slot held by a worker whose lease is gone or expired is free again.
    """
    closed = session.scalar(select(CampaignStudy.closed)
                            .where(CampaignStudy.id == campaign_study_id).with_for_update())
    if confirmation:
        done = session.scalar(select(func.count()).where(
            CampaignSlot.campaign_study_id == campaign_study_id, CampaignSlot.slot < budget,
            CampaignSlot.done.is_(True)))
        if closed is None and done < budget:
            return None
        slots = range(budget, budget + 1)
    elif closed is not None:
        return None
    else:
        slots = range(budget)
    now = utcnow()
    rows = session.execute(
        select(CampaignSlot.slot, CampaignSlot.done, Lease.expires_at)
        .outerjoin(Lease, Lease.owner == CampaignSlot.owner)
        .where(CampaignSlot.campaign_study_id == campaign_study_id,
               CampaignSlot.slot.in_(list(slots)))).all()
    _seen(session, owner, now)
    taken = {slot for slot, done, expires in rows if done or (expires is not None and
                                                              expires > now)}
    free = next((slot for slot in slots if slot not in taken), None)
    if free is None:
        return None
    values = {"owner": owner, "trial_number": None, "done": False, "claimed_at": now,
              "done_at": None}
    if any(slot == free for slot, _, _ in rows):  # a dead worker's: take it over
        session.execute(update(CampaignSlot).where(
            CampaignSlot.campaign_study_id == campaign_study_id, CampaignSlot.slot == free)
            .values(**values))
    else:
        session.execute(insert(CampaignSlot).values(
            campaign_study_id=campaign_study_id, slot=free, **values))
    return free


def settle_slot(session: Session, campaign_study_id: int, slot: int, owner: str,
                trial_number: int | None) -> None:
    """Mark ``owner``'s slot done (its trial was told, or its confirmation ran).

    Raises:
        StoreError: ``owner`` no longer holds the slot (its lease lapsed and another took it).
    """
    now = utcnow()
    _seen(session, owner, now)
    changed = session.execute(update(CampaignSlot).where(
        CampaignSlot.campaign_study_id == campaign_study_id, CampaignSlot.slot == slot,
        CampaignSlot.owner == owner).values(done=True, trial_number=trial_number,
                                            done_at=now)).rowcount
    if not changed:
        raise StoreError(f"worker {owner!r} no longer holds slot {slot} of campaign study "
                         f"{campaign_study_id} (its lease lapsed)")


def free_slot(session: Session, campaign_study_id: int, slot: int, owner: str) -> None:
    """Give back ``owner``'s slot unspent (its trial went back to the queue)."""
    session.execute(delete(CampaignSlot).where(
        CampaignSlot.campaign_study_id == campaign_study_id, CampaignSlot.slot == slot,
        CampaignSlot.owner == owner, CampaignSlot.done.is_(False)))


def held_slots(session: Session, campaign_study_id: int) -> int:
    """Trial or confirmation slots of a study a live worker holds and has not settled."""
    return session.scalar(
        select(func.count()).select_from(CampaignSlot)
        .join(Lease, Lease.owner == CampaignSlot.owner)
        .where(CampaignSlot.campaign_study_id == campaign_study_id,
               CampaignSlot.done.is_(False), Lease.expires_at > utcnow()))


def close_study(session: Session, campaign_study_id: int, reason: str) -> None:
    """End a campaign study before its budget (the first reason given stays)."""
    session.execute(update(CampaignStudy).where(
        CampaignStudy.id == campaign_study_id, CampaignStudy.closed.is_(None))
        .values(closed=reason[:64]))
