"""The conformance suite of the SQL coordination (``xe2tune.db.SqlCoordination``): leases,
config reservations and campaign budget slots, on any database it runs on.

A test module subclasses :class:`CoordinationContract` and provides a fresh ``store`` fixture
(a ``SqlResultStore``); the suite runs every scenario on it, the races included (threads of one
process stand for processes: each call is its own transaction). This module imports pytest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from xe2tune.db import CampaignStore, LeaseRecord, SqlCoordination, SqlResultStore
from xe2tune.testing.records import prefill, tune

RACERS = 6


def _lease(coordination: SqlCoordination, owner: str, minutes: float = 1.0) -> None:
    """A live lease of ``owner`` on another host (only its expiry says whether it is alive);
    negative ``minutes``: an expired one."""
    coordination.hold_lease(LeaseRecord(owner=owner, host="elsewhere", pid=1,
                                        expires_at=datetime.now(timezone.utc)
                                        + timedelta(minutes=minutes)))


def _race(work: Callable[[str], object], owners: list[str]) -> dict[str, object]:
    """Run ``work(owner)`` for every owner at once, released together; each one's answer."""
    start = threading.Barrier(len(owners))
    answers: dict[str, object] = {}

    def run(owner: str) -> None:
        start.wait()
        answers[owner] = work(owner)

    threads = [threading.Thread(target=run, args=(owner,)) for owner in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(answers) == len(owners), "every racer answered"
    return answers


class CoordinationContract:
    """Behaviour the SQL coordination must have on every database."""

    @pytest.fixture
    def store(self) -> SqlResultStore:
        """A fresh, empty store; each database's test module overrides this."""
        raise NotImplementedError

    @pytest.fixture
    def coordination(self, store: SqlResultStore) -> SqlCoordination:
        return SqlCoordination(store)

    def _campaign_study(self, store: SqlResultStore, trials: int) -> int:
        campaigns = CampaignStore(store)
        campaign = campaigns.create(name="slots", sampler="random", trials=trials,
                                    patience=None, confirm_rounds=2, problems=[prefill(512)])
        return campaigns.link_study(campaign.id, tune(store, prefill(512), []))

    # -- reservations -----------------------------------------------------------------------

    def test_a_config_is_reserved_by_one_owner_and_taken_over_when_its_lease_expires(
            self, store: SqlResultStore, coordination: SqlCoordination) -> None:
        study_id = tune(store, prefill(512), [])
        for owner in ("a", "b"):
            _lease(coordination, owner)
        assert coordination.reserve_config(study_id, "h1", owner="a", trial_number=0) is None
        assert coordination.reserve_config(study_id, "h1", owner="b") == "a"
        assert coordination.reserve_config(study_id, "h1", owner="a") is None  # still a's
        assert coordination.reserve_config(study_id, "h2", owner="b") is None
        _lease(coordination, "a", minutes=-1)  # a's lease expired: a stale owner
        assert coordination.reserve_config(study_id, "h1", owner="b") is None  # taken over
        _lease(coordination, "a")  # the stale owner comes back: the config stays b's
        assert coordination.reserve_config(study_id, "h1", owner="a") == "b"
        coordination.release_config(study_id, "h1", owner="b")
        coordination.release_leases(["b"])
        assert [lease.owner for lease in coordination.leases()] == ["a"]
        assert coordination.reserve_config(study_id, "h2", owner="a") is None  # b's went too
        version = store.data_version()
        _lease(coordination, "a")
        assert store.data_version() == version  # coordination is not result data

    def test_owners_racing_for_one_config_get_it_once(
            self, store: SqlResultStore, coordination: SqlCoordination) -> None:
        study_id = tune(store, prefill(512), [])
        owners = [f"racer-{k}" for k in range(RACERS)]
        for owner in owners:
            _lease(coordination, owner)
        answers = _race(lambda owner: coordination.reserve_config(study_id, "h", owner=owner),
                        owners)
        (winner,) = [owner for owner, holder in answers.items() if holder is None]
        assert all(holder == winner for owner, holder in answers.items() if owner != winner)

    def test_owners_racing_for_an_expired_reservation_take_it_over_once(
            self, store: SqlResultStore, coordination: SqlCoordination) -> None:
        study_id = tune(store, prefill(512), [])
        _lease(coordination, "dead")
        assert coordination.reserve_config(study_id, "h", owner="dead") is None
        _lease(coordination, "dead", minutes=-1)
        owners = [f"racer-{k}" for k in range(RACERS)]
        for owner in owners:
            _lease(coordination, owner)
        answers = _race(lambda owner: coordination.reserve_config(study_id, "h", owner=owner),
                        owners)
        assert sum(holder is None for holder in answers.values()) == 1

    # -- budget slots -----------------------------------------------------------------------

    def test_a_budget_is_handed_out_once_and_a_dead_workers_slot_comes_back(
            self, store: SqlResultStore, coordination: SqlCoordination) -> None:
        link = self._campaign_study(store, trials=2)
        for owner in ("a", "b", "c"):
            _lease(coordination, owner)
        assert coordination.claim_slot(link, 2, "a") == 0
        assert coordination.claim_slot(link, 2, "b") == 1
        assert coordination.claim_slot(link, 2, "c") is None  # the budget is held
        assert coordination.claim_slot(link, 2, "c", confirmation=True) is None  # not done yet
        coordination.settle_slot(link, 0, "a", trial_number=0)
        _lease(coordination, "b", minutes=-1)  # b died: its slot is free again, a's stays done
        assert coordination.claim_slot(link, 2, "c") == 1
        coordination.free_slot(link, 1, "c")  # c stopped: the slot goes back unspent
        assert coordination.claim_slot(link, 2, "a") == 1
        coordination.settle_slot(link, 1, "a", trial_number=1)
        assert coordination.claim_slot(link, 2, "c") is None
        assert coordination.claim_slot(link, 2, "c", confirmation=True) == 2
        assert coordination.claim_slot(link, 2, "a", confirmation=True) is None
        coordination.settle_slot(link, 2, "c", trial_number=None)
        assert coordination.held_slots(link) == 0

    def test_workers_racing_for_slots_spend_the_budget_exactly(
            self, store: SqlResultStore, coordination: SqlCoordination) -> None:
        budget = RACERS - 2
        link = self._campaign_study(store, trials=budget)
        owners = [f"racer-{k}" for k in range(RACERS)]
        for owner in owners:
            _lease(coordination, owner)
        answers = _race(lambda owner: coordination.claim_slot(link, budget, owner), owners)
        claimed = [slot for slot in answers.values() if slot is not None]
        assert sorted(claimed) == list(range(budget))  # each slot once, none beyond the budget
        assert coordination.held_slots(link) == budget
