"""Repository functions for confirmation rounds: store one, read each study's newest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import func, select

from xe2tune.db._convert import aware
from xe2tune.db._models import Confirmation, Trial
from xe2tune.db._records import ConfirmationEntry, ConfirmationRecord
from xe2tune.errors import StoreError
from xe2tune.measurement import TrialStatus

if TYPE_CHECKING:
    from sqlalchemy import Subquery
    from sqlalchemy.orm import Session

OK = TrialStatus.OK.value


def insert_confirmation(session: Session, record: ConfirmationRecord) -> int:
    """Validate and store a confirmation round; return its id.

    Raises:
        StoreError: no entry ran OK, or an entry names a trial that is not a stored trial of
            the study with that config hash (or the best is not an OK trial).
    """
    try:
        best = record.best
    except ValueError as exc:
        raise StoreError(f"cannot store the confirmation round: {exc}") from None
    stored = dict(session.execute(
        select(Trial.id, Trial.config_hash).where(
            Trial.study_id == record.study_id,
            Trial.id.in_([e.trial_id for e in record.entries]))).all())
    wrong = [e.trial_id for e in record.entries if stored.get(e.trial_id) != e.config_hash]
    if wrong:
        raise StoreError(f"confirmation entries name trials {wrong} that are not stored in "
                         f"study {record.study_id} with those config hashes")
    if session.scalar(select(Trial.status).where(Trial.id == best.trial_id)) != OK:
        raise StoreError(f"the confirmed best, trial {best.trial_id}, is not an OK trial")
    default = record.default
    row = Confirmation(
        study_id=record.study_id, rounds=record.rounds, best_trial_id=best.trial_id,
        best_median_s=best.median_s,
        default_median_s=default.median_s if default is not None else None,
        entries=[e.model_dump(mode="json") for e in record.entries],
    )
    session.add(row)
    session.flush()
    return row.id


def latest_confirmations(session: Session, study_ids: list[int]) -> dict[int, ConfirmationRecord]:
    """The newest confirmation round of each study that has one."""
    newest = (select(func.max(Confirmation.id)).where(Confirmation.study_id.in_(study_ids))
              .group_by(Confirmation.study_id))
    return {
        row.study_id: ConfirmationRecord(
            study_id=row.study_id, rounds=row.rounds, created_at=aware(row.created_at),
            entries=tuple(ConfirmationEntry.model_validate(e) for e in row.entries))
        for row in session.scalars(select(Confirmation).where(Confirmation.id.in_(newest)))
    }


def confirmed_bests() -> Subquery:
    """(study_id, best_median_s) of each study's newest confirmation round."""
    newest = select(func.max(Confirmation.id)).group_by(Confirmation.study_id)
    return (select(Confirmation.study_id, Confirmation.best_median_s)
            .where(Confirmation.id.in_(newest)).subquery())
