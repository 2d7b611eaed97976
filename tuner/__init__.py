"""Search: spaces of valid configs, samplers, the study loop and replay of recorded spaces.

A search runs over a ``FiniteSpace``: the *valid* configs of a kernel family, enumerated up front.
``make_sampler(name, space, seed)`` returns an optuna sampler that only ever proposes a valid
config the study has not evaluated, is not evaluating and has not queued. Use it with ask/tell,
giving ``study.ask`` exactly the space's distributions::

    space = FiniteSpace.from_params(params, valid=predicate_or_list_of_config_dicts)
    study = optuna.create_study(
        storage=url, study_name=name, load_if_exists=True, direction="minimize",
        sampler=make_sampler(DEFAULT_SAMPLER, space, seed=None),
    )
    study.enqueue_trial(default_config, skip_if_exists=True)  # then neighbours' best configs
    distributions = space.distributions()
    for _ in range(n_trials):
        trial = study.ask(distributions)          # enqueued trials come out first, as given
        config = trial.params                     # a dict: one of space.configs
        try:
            time_ms = measure(config)
        except (KernelCompileError, LaunchResourceError, WrongResultError) as exc:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)  # never proposed again
        else:
            study.tell(trial, time_ms)            # minimized

Resuming is the same code: the sampler reads the study's trials from storage on every ask
(COMPLETE with their values; FAIL and PRUNED as tried; RUNNING and WAITING as taken). When
every valid config is tried, ``ask`` raises ``SpaceExhaustedError``; stop at ``len(space)``
trials to avoid it. One sampler instance per study.

Offline, ``load_recording`` reads a brute-forced Kernel Tuner cache or T4 file, ``replay``
answers a sampler's trials from it, and ``evaluate`` scores seeded replays with the
methodology of Willemsen et al. (0 = random search, 1 = optimum): its time-based score
(``time_score``) and a trial-count variant (``trial_count_score``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xe2tune.tuner._budget import TuneBudget
from xe2tune.tuner._campaign import SlotGate
from xe2tune.tuner._confirm import ConfirmSettings
from xe2tune.tuner._coordinator import AskedTrial, TrialCoordinator
from xe2tune.tuner._evaluate import (
    FRACTIONS,
    Baselines,
    SeedResult,
    StrategyReport,
    baselines,
    evaluate,
    report_points,
    score_run,
)
from xe2tune.tuner._finite_sampler import FiniteSpaceSampler, History, SpaceExhaustedError
from xe2tune.tuner._lease import SearchLease
from xe2tune.tuner._methodology import (
    NoRecordedTimeError,
    RunTrace,
    TimeBudget,
    time_budget,
    time_score,
    time_score_error,
    trace,
    trial_seconds,
)
from xe2tune.tuner._problems import ProblemOverrides, default_problems
from xe2tune.tuner._progress import Outcome, StudyProgress
from xe2tune.tuner._remote_worker import (
    MIN_STALE_S,
    STALE_S,
    RemoteStudy,
    ResultPoster,
    WorkerReport,
    load_campaign,
    publish_campaign,
    run_remote_worker,
)
from xe2tune.tuner._replay import NotARecordingError, Recording, ReplayRun, load_recording, replay
from xe2tune.tuner._samplers import (
    DEFAULT_SAMPLER,
    SAMPLER_NAMES,
    UnknownSamplerError,
    make_sampler,
)
from xe2tune.tuner._score import (
    RandomBaseline,
    random_baseline,
    score_points,
    trial_count_score,
    trials_to_fraction,
)
from xe2tune.tuner._search import SearchPlan, run_search
from xe2tune.tuner._space import EmptySpaceError, FiniteSpace
from xe2tune.tuner._sql_coordinator import SqlTrialCoordinator
from xe2tune.tuner._storage_coordinator import StorageTrialCoordinator
from xe2tune.tuner._study_loop import TrialLoop, TrialRecorder
from xe2tune.tuner._trial_runner import (
    InProcessTrialRunner,
    PhaseMark,
    SupervisedTrialRunner,
    TrialRunner,
)
from xe2tune.tuner._worker_loop import WorkerTally, run_worker, unfit_reason

if TYPE_CHECKING:
    from xe2tune.tuner._grpc_client import ClientTls, TokenGrpcStorage

# The gRPC client needs grpcio (the [grpc] extra), and grpcio reads GRPC_ENABLE_FORK_SUPPORT once,
# when it is first imported: these two names load it on first use only.
_GRPC_NAMES = ("ClientTls", "TokenGrpcStorage")


def __getattr__(name: str) -> object:
    if name in _GRPC_NAMES:
        from xe2tune.tuner import _grpc_client

        return getattr(_grpc_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_SAMPLER",
    "MIN_STALE_S",
    "STALE_S",
    "ClientTls",
    "RemoteStudy",
    "ResultPoster",
    "TokenGrpcStorage",
    "WorkerReport",
    "WorkerTally",
    "load_campaign",
    "publish_campaign",
    "run_remote_worker",
    "run_worker",
    "unfit_reason",
    "AskedTrial",
    "SearchLease",
    "SlotGate",
    "SqlTrialCoordinator",
    "StorageTrialCoordinator",
    "TrialCoordinator",
    "TrialLoop",
    "TrialRecorder",
    "Baselines",
    "FRACTIONS",
    "SAMPLER_NAMES",
    "ConfirmSettings",
    "EmptySpaceError",
    "FiniteSpace",
    "FiniteSpaceSampler",
    "History",
    "InProcessTrialRunner",
    "PhaseMark",
    "SupervisedTrialRunner",
    "NoRecordedTimeError",
    "NotARecordingError",
    "Outcome",
    "ProblemOverrides",
    "RandomBaseline",
    "RunTrace",
    "Recording",
    "ReplayRun",
    "SearchPlan",
    "SeedResult",
    "SpaceExhaustedError",
    "StrategyReport",
    "StudyProgress",
    "TimeBudget",
    "TrialRunner",
    "TuneBudget",
    "UnknownSamplerError",
    "baselines",
    "default_problems",
    "evaluate",
    "load_recording",
    "make_sampler",
    "random_baseline",
    "replay",
    "report_points",
    "run_search",
    "score_points",
    "score_run",
    "time_budget",
    "time_score",
    "time_score_error",
    "trace",
    "trial_count_score",
    "trial_seconds",
    "trials_to_fraction",
]
