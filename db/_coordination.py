"""SqlCoordination: the state several processes coordinate their trials through, on the
results database (leases, config reservations, campaign workers and budget slots).

It is not results: ``ResultStore`` never sees it, and none of its writes bumps
``data_version`` (readers would refresh on every heartbeat). The tuner's SQL coordinator
(``tuner/_sql_coordinator.py``, ``_lease.py``, ``_campaign.py``) is its only writer;
``campaign status`` reads it through ``CampaignStore.status``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from xe2tune.db import _reservations, _slots

if TYPE_CHECKING:
    from xe2tune.db._records import LeaseRecord
    from xe2tune.db._sql_store import SqlResultStore


class SqlCoordination:
    """Leases, reservations and budget slots on the database of a ``SqlResultStore``.

    Every method is one transaction of the store's; safe to share between threads. A search
    process holds a lease (renewed by a heartbeat) while it runs, and reserves each config
    before measuring it: two searches of one problem never measure the same config.
    Reservations and slots of an expired or released lease are free again.
    """

    def __init__(self, store: SqlResultStore) -> None:
        self._transactions = store.transactions

    # -- leases -----------------------------------------------------------------------------

    def hold_lease(self, lease: LeaseRecord) -> None:
        """Insert the process's lease, or move its expiry (the heartbeat).

        Raises:
            StoreError: the database could not be written.
        """
        self._transactions.write(lambda s: _reservations.hold_lease(s, lease))

    def leases(self) -> list[LeaseRecord]:
        """Every lease (live or not), oldest first.

        Raises:
            StoreError: the database could not be read.
        """
        with self._transactions.read() as session:
            return _reservations.leases(session)

    def release_leases(self, owners: Sequence[str]) -> None:
        """Drop these leases and every reservation they hold (at exit, or for a dead holder).

        Raises:
            StoreError: the database could not be written.
        """
        self._transactions.write(lambda s: _reservations.release_leases(s, list(owners)))

    # -- config reservations ----------------------------------------------------------------

    def reserve_config(self, study_id: int, config_hash: str, *, owner: str,
                       trial_number: int | None = None) -> str | None:
        """Atomically reserve a config of a study for the lease ``owner`` before measuring it.

        Returns:
            None when ``owner`` now holds the config (newly, again, or taken over from an
            expired lease); else the owner of the live lease that holds it.

        Raises:
            StoreError: ``owner`` holds no lease, unknown study, or the database failed.
        """
        return self._transactions.write(lambda s: _reservations.reserve_config(
            s, study_id, config_hash, owner, trial_number))

    def release_config(self, study_id: int, config_hash: str, *, owner: str) -> None:
        """Drop ``owner``'s reservation of a config (after storing it, or when abandoning it).

        Raises:
            StoreError: the database could not be written.
        """
        self._transactions.write(
            lambda s: _reservations.release_config(s, study_id, config_hash, owner))

    # -- campaign workers and budget slots --------------------------------------------------

    def join(self, campaign_id: int, *, owner: str, device_id: int, host: str,
             pid: int) -> None:
        """Record this worker (its lease's owner) as one of the campaign's."""
        self._transactions.write(lambda s: _slots.join_campaign(
            s, campaign_id, owner=owner, device_id=device_id, host=host, pid=pid))

    def leave(self, owner: str) -> None:
        """Mark this worker finished."""
        self._transactions.write(lambda s: _slots.leave_campaign(s, owner))

    def claim_slot(self, campaign_study_id: int, budget: int, owner: str, *,
                   confirmation: bool = False) -> int | None:
        """See :func:`xe2tune.db._slots.claim_slot`."""
        return self._transactions.write(lambda s: _slots.claim_slot(
            s, campaign_study_id, budget, owner, confirmation=confirmation))

    def settle_slot(self, campaign_study_id: int, slot: int, owner: str,
                    trial_number: int | None) -> None:
        """See :func:`xe2tune.db._slots.settle_slot`."""
        self._transactions.write(lambda s: _slots.settle_slot(
            s, campaign_study_id, slot, owner, trial_number))

    def free_slot(self, campaign_study_id: int, slot: int, owner: str) -> None:
        """See :func:`xe2tune.db._slots.free_slot`."""
        self._transactions.write(lambda s: _slots.free_slot(s, campaign_study_id, slot, owner))

    def held_slots(self, campaign_study_id: int) -> int:
        """See :func:`xe2tune.db._slots.held_slots`."""
        with self._transactions.read() as session:
            return _slots.held_slots(session, campaign_study_id)

    def close_study(self, campaign_study_id: int, reason: str) -> None:
        """See :func:`xe2tune.db._slots.close_study`."""
        self._transactions.write(lambda s: _slots.close_study(s, campaign_study_id, reason))
