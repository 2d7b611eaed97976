"""The study loop's order of builds and measurements (tuner/_study_loop.py), on the SQL
coordinator over SQLite: what each trial asks of the runner, in order."""

from __future__ import annotations

from pathlib import Path

from xe2tune.harness import MeasureRequest, TrialResult
from xe2tune.kernels import get_family
from xe2tune.testing.records import ok_result
from xe2tune.testing.trial_coordinator_contract import PROBLEM, NoRecorder, World, config_of
from xe2tune.tuner import StudyProgress, TrialLoop


class RecordingRunner:
    """Records the loop's calls; measures every config as the same OK result."""

    def __init__(self, depth: int) -> None:
        self.prebuild_depth = depth
        self.calls: list[tuple[str, str]] = []

    def prebuild(self, request: MeasureRequest) -> None:
        self.calls.append(("prebuild", request.config.config_hash()))

    def measure(self, request: MeasureRequest) -> TrialResult:
        self.calls.append(("measure", request.config.config_hash()))
        return ok_result(request.config, median_s=1e-3)


def test_every_trial_is_prebuilt_in_the_order_asked_the_first_before_those_ahead(
        tmp_path: Path) -> None:
    """The first trial too goes to the background builds, ahead of the trials asked ahead:
    measured unbuilt, it compiled beside all of them (three builds for two threads)."""
    world = World.create("sql", f"sqlite:///{tmp_path / 'loop.db'}", budget=None)
    runner = RecordingRunner(depth=2)
    with world.owner() as coordinator:
        loop = TrialLoop(coordinator, NoRecorder(), runner,
                         lambda config: MeasureRequest(get_family("sdpa_prefill"), PROBLEM,
                                                       config),
                         config_of({"bq": 64, "stages": 2}))
        progress = StudyProgress(problem=PROBLEM, space_size=12, cartesian_size=12,
                                 trial_index=0, trials_budget=5)
        loop.run(progress, 5, patience=None, deadline=None, observe=lambda _: None,
                 should_stop=lambda: False)
    prebuilt = [h for call, h in runner.calls if call == "prebuild"]
    measured = [h for call, h in runner.calls if call == "measure"]
    assert len(measured) == 5 and prebuilt == measured  # each once, in the order asked
    assert runner.calls[:3] == [("prebuild", h) for h in measured[:3]]
    for i, h in enumerate(measured):  # built before measured, never more than 2 ahead
        at = runner.calls.index(("measure", h))
        assert ("prebuild", h) in runner.calls[:at]
        assert sum(call == "prebuild" for call, _ in runner.calls[:at]) <= i + 3
