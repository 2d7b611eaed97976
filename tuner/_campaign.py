"""A campaign study's budget as one worker sees it: slots to claim before asking a trial.

Several workers share a study; each trial runs in a slot the worker claimed first, so the
study gets exactly its budget of trials however many workers join or die. A slot is settled
when its trial is told, freed when the trial goes back to the queue (a stop, a signal), and
freed for others when its worker's lease dies (SIGKILL, a lost host); the dead worker's trial is
requeued by the next worker's recovery and re-run in that slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from xe2tune.db import CampaignRecord, SqlCoordination


@dataclass(frozen=True)
class SlotGate:
    """One worker's claims on one campaign study's budget (its lease's owner id)."""

    coordination: SqlCoordination
    campaign: CampaignRecord
    campaign_study_id: int
    owner: str

    def claim_trial(self) -> int | None:
        """A trial slot for this worker, None when every slot is done or held, or the study
        closed early.

        Raises:
            StoreError: the database failed.
        """
        return self.coordination.claim_slot(self.campaign_study_id, self.campaign.trials,
                                         self.owner)

    def claim_confirmation(self) -> bool:
        """True when this worker now holds the confirmation round (every trial slot done)."""
        return self.coordination.claim_slot(self.campaign_study_id, self.campaign.trials,
                                         self.owner, confirmation=True) is not None

    def settle(self, slot: int, trial_number: int | None = None) -> None:
        """The slot's work is done (its trial told, or the confirmation stored)."""
        self.coordination.settle_slot(self.campaign_study_id, slot, self.owner, trial_number)

    def settle_confirmation(self) -> None:
        """The confirmation round ran."""
        self.settle(self.campaign.trials)

    def free(self, slot: int) -> None:
        """Give the slot back unspent."""
        self.coordination.free_slot(self.campaign_study_id, slot, self.owner)

    def others_hold_slots(self) -> bool:
        """True while another live worker holds an unsettled slot (it may be asking a trial);
        asked while this worker holds the confirmation slot."""
        return self.coordination.held_slots(self.campaign_study_id) > 1

    def close(self, reason: str) -> None:
        """End the study before its budget, for every worker."""
        self.coordination.close_study(self.campaign_study_id, reason)
