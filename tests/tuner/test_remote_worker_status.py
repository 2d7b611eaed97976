"""``campaign status`` on the gRPC path counts each worker's trials from the trials it told."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from xe2tune.db import CAMPAIGN_STUDY, OWNER_ATTR, STUDY_ATTR, DeviceRecord
from xe2tune.db._campaign_remote import remote_progress
from xe2tune.kernels import ProblemSpec
from xe2tune.tuner._remote_worker import WorkerReport

DEVICE = DeviceRecord(name="Synthetic Xe2", backend="opencl", driver="1.0", compute_units=20)


def test_a_worker_killed_between_its_tell_and_its_next_report_keeps_its_trial(
        tmp_path: Path) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}")
    campaign = optuna.create_study(study_name=CAMPAIGN_STUDY.format(id=1), storage=storage)
    reports = {owner: WorkerReport(storage, 1, owner=owner, host="h", pid=pid, device=DEVICE,
                                   stale_after_s=30.0)
               for owner, pid in (("victim", 11), ("survivor", 12))}
    problem = ProblemSpec("prefill", 128, "fp16", 512, 512)
    device_study = optuna.create_study(study_name="device study", storage=storage)
    campaign.set_user_attr(STUDY_ATTR.format(name="device study"), {
        "device": DEVICE.name, "driver": DEVICE.driver, "compute_units": 20,
        "family": "sdpa_xmx_prefill", "problem": problem.to_dict()})
    told = [("victim", TrialState.COMPLETE), ("victim", TrialState.FAIL),
            ("survivor", TrialState.COMPLETE), ("survivor", TrialState.RUNNING)]
    for owner, state in told:
        device_study.add_trial(create_trial(
            state=state, value=1e-3 if state is TrialState.COMPLETE else None,
            params={"bq": 64}, distributions={"bq": CategoricalDistribution([64])},
            user_attrs={OWNER_ATTR: owner}))
    # Only the survivor reports again; the victim's report is from before its trials.
    reports["survivor"].beat(finished=True)

    studies, workers = remote_progress(storage, 1)

    assert [(s.done, s.running) for s in studies] == [(3, 1)]
    assert {w.owner: (w.trials_done, w.finished_at is not None) for w in workers} == {
        "victim": (2, False), "survivor": (1, True)}
