"""Repository functions for leases and config reservations (concurrent searches of one study).

They write with Core statements, not ORM objects: leases and reservations are coordination, not
results, so they do not bump ``data_version`` (readers would refresh on every heartbeat).
Every function takes a Session inside a transaction and never commits.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy import delete, insert, select, update

from xe2tune.db._convert import aware
from xe2tune.db._models import Lease, Reservation, Study, utcnow
from xe2tune.db._records import LeaseRecord
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.orm import Session


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(tzinfo=None) if moment.tzinfo else moment


def hold_lease(session: Session, lease: LeaseRecord) -> None:
    """Insert the lease or move its expiry (a heartbeat)."""
    values = {"host": lease.host, "pid": lease.pid, "expires_at": _naive(lease.expires_at),
              "renewed_at": utcnow()}
    changed = session.execute(
        update(Lease).where(Lease.owner == lease.owner).values(**values)).rowcount
    if not changed:
        session.execute(insert(Lease).values(owner=lease.owner, created_at=utcnow(), **values))


def leases(session: Session) -> list[LeaseRecord]:
    """Every lease, oldest first."""
    rows = session.execute(select(Lease.owner, Lease.host, Lease.pid, Lease.expires_at)
                           .order_by(Lease.created_at, Lease.owner))
    return [LeaseRecord(owner=owner, host=host, pid=pid, expires_at=aware(expires))
            for owner, host, pid, expires in rows]


def release_leases(session: Session, owners: Sequence[str]) -> None:
    """Drop the leases and every reservation they hold."""
    if owners:
        session.execute(delete(Reservation).where(Reservation.owner.in_(owners)))
        session.execute(delete(Lease).where(Lease.owner.in_(owners)))


def reserve_config(session: Session, study_id: int, config_hash: str, owner: str,
                   trial_number: int | None) -> str | None:
    """Reserve a config of a study for ``owner``; None when it now holds it, else the holder.

    A reservation whose holder's lease has expired (or was released) is taken over.

    Raises:
        StoreError: ``owner`` holds no lease, or the study does not exist.
    """
    now = utcnow()
    lease = session.get(Lease, owner)
    if lease is None:
        raise StoreError(f"search {owner!r} holds no lease; hold one before reserving configs")
    if session.get(Study, study_id) is None:
        raise StoreError(f"unknown study id {study_id}")
    found = session.execute(
        select(Reservation.id, Reservation.owner, Lease.expires_at)
        .outerjoin(Lease, Lease.owner == Reservation.owner)
        .where(Reservation.study_id == study_id, Reservation.config_hash == config_hash)
    ).one_or_none()
    if found is None:
        session.execute(insert(Reservation).values(
            study_id=study_id, config_hash=config_hash, owner=owner, trial_number=trial_number,
            created_at=now))
        return None
    reservation_id, holder, expires = found
    if holder != owner and expires is not None and expires > now:
        return holder
    # Conditional on the holder we saw: of two searches taking over one expired reservation
    # at once (PostgreSQL has no database-wide write lock), only one updates the row.
    taken = session.execute(update(Reservation).where(
        Reservation.id == reservation_id, Reservation.owner == holder).values(
        owner=owner, trial_number=trial_number, created_at=now)).rowcount
    if not taken:
        return session.scalar(
            select(Reservation.owner).where(Reservation.id == reservation_id)) or holder
    return None


def release_config(session: Session, study_id: int, config_hash: str, owner: str) -> None:
    """Drop ``owner``'s reservation of a config (nothing when it holds none)."""
    session.execute(delete(Reservation).where(
        Reservation.study_id == study_id, Reservation.config_hash == config_hash,
        Reservation.owner == owner))
