"""The one ask -> hold -> measure -> record -> tell loop, for every kind of owner.

``xe2tune search`` and database workers drive it with the SQL coordinator and the results
store, gRPC workers with the optuna-storage coordinator and the API: the loop knows only the
:class:`TrialCoordinator` contract, a :class:`TrialRecorder` and the runner. It keeps up to the
runner's ``prebuild_depth`` trials asked ahead of the one measured, each handed to
``runner.prebuild`` as it is asked, so the device never waits for a compile.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from xe2tune.harness import MeasureRequest, TrialResult
from xe2tune.kernels import LauncherConfig
from xe2tune.tuner._coordinator import AskedTrial, TrialCoordinator
from xe2tune.tuner._progress import Observer, Outcome, StudyProgress
from xe2tune.tuner._trial_runner import TrialRunner


class TrialRecorder(Protocol):
    """Where a study's measurements go (the results store, or the API of one)."""

    def stored_outcome(self, asked: AskedTrial) -> Outcome | None:
        """The config's stored outcome when another owner measured it already, else None."""
        ...

    def save(self, asked: AskedTrial, result: TrialResult) -> None:
        """Store the measurement of ``asked``.

        Raises:
            StoreError: it could not be stored.
        """
        ...


@dataclass(frozen=True)
class TrialLoop:
    """One study's loop: its coordinator, recorder and runner, and how a config is measured."""

    coordinator: TrialCoordinator
    recorder: TrialRecorder
    runner: TrialRunner
    request: Callable[[LauncherConfig], MeasureRequest]
    default: LauncherConfig  # the study's default config (progress.default)

    def run(self, progress: StudyProgress, trials: int, *, patience: int | None,
            deadline: float | None, observe: Observer,
            should_stop: Callable[[], bool]) -> None:
        """Run up to ``trials`` trials; stop early on ``should_stop``, the ``deadline``
        (``time.perf_counter``), ``patience`` trials without a better one, the shared budget's
        patience, or when the coordinator has no trial to give. Every trial asked and not told
        goes back to the queue before it returns or raises.

        Raises:
            TrialAbandoned: a stop while measuring or waiting on a config.
            DeviceProcessError: the runner failed.
            StoreError: the storage failed.
        """
        since_best = 0
        untold: deque[AskedTrial] = deque()  # the trial measured first, then those asked ahead
        try:
            first = self.coordinator.ask()
            if first is not None:
                untold.append(first)
                # Built in the background ahead of those asked ahead, as they are: measured
                # unbuilt, it would compile beside all of them (three builds at once for two
                # build threads, the first result the last to come).
                self.runner.prebuild(self.request(first.config))
            while untold and progress.trial_index < trials:
                current = untold[0]
                progress.trial_index += 1
                progress.config, progress.phase = current.config, "measuring"
                observe(progress)
                self._ask_ahead(untold, progress.trial_index, trials, should_stop)
                result = self._outcome(current, progress, should_stop)
                telling = time.perf_counter()
                self.coordinator.tell(current, result)
                progress.store_s += time.perf_counter() - telling
                untold.popleft()
                progress.build_s += result.build_s
                progress.verify_s += result.verify_s
                progress.bench_s += result.bench_s
                since_best = 0 if progress.count(result, self.default) else since_best + 1
                progress.phase = "measured"
                observe(progress)
                out_of_time = deadline is not None and time.perf_counter() >= deadline
                # A shared budget's patience is judged study-wide; trials asked ahead go back.
                patience_out = (patience is not None and since_best >= patience
                                or self.coordinator.patience_spent())
                if should_stop() or out_of_time or patience_out:
                    return
        finally:
            for asked in untold:
                self.coordinator.give_back(asked)

    def _ask_ahead(self, untold: deque[AskedTrial], started: int, trials: int,
                   should_stop: Callable[[], bool]) -> None:
        """Ask until ``prebuild_depth`` trials wait behind the one measured (none beyond the
        run's ``trials``), each prebuilt as it comes."""
        while (len(untold) <= self.runner.prebuild_depth
               and started + len(untold) - 1 < trials and not should_stop()):
            asked = self.coordinator.ask()
            if asked is None:
                return
            untold.append(asked)
            self.runner.prebuild(self.request(asked.config))

    def _outcome(self, asked: AskedTrial, progress: StudyProgress,
                 should_stop: Callable[[], bool]) -> Outcome:
        self.coordinator.hold(asked, lambda: self.recorder.stored_outcome(asked) is not None,
                              should_stop)
        stored = self.recorder.stored_outcome(asked)
        if stored is not None:
            progress.reused += 1
            return stored
        result = self.runner.measure(self.request(asked.config))
        recording = time.perf_counter()
        self.recorder.save(asked, result)
        progress.store_s += time.perf_counter() - recording
        progress.measured += 1
        return Outcome.from_result(result)
