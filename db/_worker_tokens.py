"""Worker tokens: credentials scoped to one campaign, minted and revoked by the operator.

A remote worker presents its token on every gRPC storage call and every ``POST /v1/results``;
the server looks it up by its sha256. Tokens are coordination, not results: they are written
with Core statements (no ``data_version`` bump). The same module reads, from optuna's own tables
in this database, which study a study id or trial id belongs to, so that a server can keep a
token to its campaign's studies.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import insert, select, text, update

from xe2tune.db._campaign_models import Campaign, WorkerToken
from xe2tune.db._convert import aware
from xe2tune.db._models import utcnow
from xe2tune.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from xe2tune.db._sql_store import SqlResultStore

TOKEN_PREFIX = "xe2t_"  # says what a leaked string is when it turns up in a log


@dataclass(frozen=True)
class WorkerTokenRecord:
    """A minted token as stored: never the token itself."""

    id: int
    campaign_id: int
    name: str
    created_at: datetime
    revoked_at: datetime | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


@dataclass(frozen=True)
class MintedToken:
    """A token just minted: ``secret`` is shown to the operator once and stored nowhere."""

    record: WorkerTokenRecord
    secret: str


def token_digest(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _record(row: WorkerToken) -> WorkerTokenRecord:
    return WorkerTokenRecord(id=row.id, campaign_id=row.campaign_id, name=row.name,
                             created_at=aware(row.created_at),
                             revoked_at=aware(row.revoked_at) if row.revoked_at else None)


# -- repository functions: each takes a Session inside a transaction and never commits --------


def mint_token(session: Session, campaign_id: int, name: str, digest: str) -> int:
    """Store a token's digest for the campaign; its id.

    Raises:
        StoreError: there is no such campaign.
    """
    if session.get(Campaign, campaign_id) is None:
        raise StoreError(f"no campaign {campaign_id}; accepted: an id of `xe2tune campaign list`")
    return session.execute(insert(WorkerToken).values(
        campaign_id=campaign_id, name=name, token_sha256=digest, created_at=utcnow())
        .returning(WorkerToken.id)).scalar_one()


def campaign_tokens(session: Session, campaign_id: int) -> list[WorkerTokenRecord]:
    """The campaign's tokens, oldest first, revoked ones included."""
    return [_record(row) for row in session.scalars(
        select(WorkerToken).where(WorkerToken.campaign_id == campaign_id)
        .order_by(WorkerToken.id))]


def revoke_token(session: Session, campaign_id: int, token_id: int) -> WorkerTokenRecord:
    """Revoke one of the campaign's tokens (revoking twice keeps the first time).

    Raises:
        StoreError: the campaign has no token with this id.
    """
    session.execute(update(WorkerToken).where(
        WorkerToken.id == token_id, WorkerToken.campaign_id == campaign_id,
        WorkerToken.revoked_at.is_(None)).values(revoked_at=utcnow()))
    row = session.scalar(select(WorkerToken).where(
        WorkerToken.id == token_id, WorkerToken.campaign_id == campaign_id))
    if row is None:
        known = ", ".join(str(t.id) for t in campaign_tokens(session, campaign_id))
        raise StoreError(f"campaign {campaign_id} has no token {token_id}; accepted: "
                         + (known or "none minted yet (`xe2tune campaign token create`)"))
    return _record(row)


def find_token(session: Session, digest: str) -> WorkerTokenRecord | None:
    """The token with this digest, revoked or not; None when nobody minted it."""
    row = session.scalar(select(WorkerToken).where(WorkerToken.token_sha256 == digest))
    return None if row is None else _record(row)


def optuna_study_name(session: Session, *, study_id: int | None = None,
                      trial_id: int | None = None) -> str | None:
    """The name of the optuna study with this id, or holding this trial; None if none does.

    Reads optuna's ``studies`` and ``trials`` tables (their layout is optuna's storage schema,
    stable since optuna 1.x).
    """
    if trial_id is not None:
        return session.execute(text(
            "SELECT s.study_name FROM studies s JOIN trials t ON t.study_id = s.study_id "
            "WHERE t.trial_id = :id"), {"id": trial_id}).scalar()
    return session.execute(text("SELECT study_name FROM studies WHERE study_id = :id"),
                           {"id": study_id}).scalar()


# -- the store's face for tokens ---------------------------------------------------------------


class WorkerTokenStore:
    """Token reads and writes on a results store, in its transactions (same package)."""

    def __init__(self, store: SqlResultStore) -> None:
        self._transactions = store.transactions

    def create(self, campaign_id: int, name: str) -> MintedToken:
        """Mint a token for the campaign's workers.

        Raises:
            StoreError: no such campaign, or the database failed.
        """
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = self._transactions.write(
            lambda s: mint_token(s, campaign_id, name, token_digest(secret)))
        (record,) = [t for t in self.list(campaign_id) if t.id == token_id]
        return MintedToken(record=record, secret=secret)

    def list(self, campaign_id: int) -> list[WorkerTokenRecord]:
        """See :func:`campaign_tokens`."""
        with self._transactions.read() as session:
            return campaign_tokens(session, campaign_id)

    def revoke(self, campaign_id: int, token_id: int) -> WorkerTokenRecord:
        """See :func:`revoke_token`.

        Raises:
            StoreError: no such token of the campaign, or the database failed.
        """
        return self._transactions.write(lambda s: revoke_token(s, campaign_id, token_id))

    def find(self, secret: str) -> WorkerTokenRecord | None:
        """See :func:`find_token`."""
        with self._transactions.read() as session:
            return find_token(session, token_digest(secret))

    def optuna_study_name(self, *, study_id: int | None = None,
                          trial_id: int | None = None) -> str | None:
        """See :func:`optuna_study_name`."""
        with self._transactions.read() as session:
            return optuna_study_name(session, study_id=study_id, trial_id=trial_id)
