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

from xe2tune._lazy import lazy_exports

# Every name loads its module on first use, so the light ones (the sampler names, the budget, the
# default problems) answer the CLI's argument checks without optuna, SQLAlchemy or the device
# stack, and the gRPC client's grpcio (the [grpc] extra, which reads GRPC_ENABLE_FORK_SUPPORT once,
# when first imported) loads only with it.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "_budget": ("ConfirmSettings", "TuneBudget"),
    "_campaign": ("SlotGate",),
    "_coordinator": ("AskedTrial", "TrialCoordinator"),
    "_evaluate": (
        "FRACTIONS", "Baselines", "SeedResult", "StrategyReport", "baselines", "evaluate",
        "report_points", "score_run"
    ),
    "_finite_sampler": ("FiniteSpaceSampler", "History", "SpaceExhaustedError"),
    "_lease": ("SearchLease",),
    "_methodology": (
        "NoRecordedTimeError", "RunTrace", "TimeBudget", "time_budget", "time_score",
        "time_score_error", "trace", "trial_seconds"
    ),
    "_problems": ("ProblemOverrides", "default_problems"),
    "_progress": ("Outcome", "StudyProgress"),
    "_remote_worker": (
        "MIN_STALE_S", "STALE_S", "RemoteStudy", "ResultPoster", "WorkerReport",
        "load_campaign", "publish_campaign", "run_remote_worker"
    ),
    "_replay": ("NotARecordingError", "Recording", "ReplayRun", "load_recording", "replay"),
    "_samplers": ("DEFAULT_SAMPLER", "SAMPLER_NAMES", "UnknownSamplerError", "make_sampler"),
    "_score": (
        "RandomBaseline", "random_baseline", "score_points", "trial_count_score",
        "trials_to_fraction"
    ),
    "_search": ("SearchPlan", "run_search"),
    "_space": ("EmptySpaceError", "FiniteSpace"),
    "_sql_coordinator": ("SqlTrialCoordinator",),
    "_storage_coordinator": ("StorageTrialCoordinator",),
    "_study_loop": ("TrialLoop", "TrialRecorder"),
    "_trial_runner": ("InProcessTrialRunner", "PhaseMark", "SupervisedTrialRunner", "TrialRunner"),
    "_worker_loop": ("WorkerTally", "run_worker", "unfit_reason"),
    "_grpc_client": ("ClientTls", "TokenGrpcStorage"),
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, globals())
