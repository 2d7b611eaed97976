"""Every registered strategy honours the FiniteSpace sampler contract, through optuna's ask/tell."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from _spaces import SYNTHETIC_PARAMS, synthetic_time, write_cache
from optuna.trial import TrialState

from xe2tune.tuner import (
    DEFAULT_SAMPLER,
    SAMPLER_NAMES,
    EmptySpaceError,
    FiniteSpace,
    SpaceExhaustedError,
    UnknownSamplerError,
    evaluate,
    load_recording,
    make_sampler,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)

PARAMS = {
    "tile": [8, 16, 32, 64],
    "stages": [1, 2, 3],
    "layout": ["row", "col"],
    "fast": [False, True],
}


def small_space() -> FiniteSpace:
    return FiniteSpace.from_params(PARAMS, valid=lambda c: c["tile"] * c["stages"] <= 96)


def objective(config: dict) -> float | None:
    """A time, or None for a config that fails to build."""
    if config["tile"] == 64 and config["fast"]:
        return None
    return abs(config["tile"] - 32) / 8 + config["stages"] + (config["layout"] == "col") + 0.5


def ask_tell(study: optuna.Study, space: FiniteSpace, n: int) -> list[dict]:
    seen = []
    for _ in range(n):
        trial = study.ask(space.distributions())
        seen.append(trial.params)
        value = objective(trial.params)
        if value is None:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, value)
    return seen


class StrategyContract:
    """What every sampler must do; subclasses provide the ``name`` fixture."""

    def test_only_valid_never_repeated_until_exhausted(self, name):
        space = small_space()
        study = optuna.create_study(sampler=make_sampler(name, space, seed=1))
        seen = ask_tell(study, space, len(space))
        assert all(space.index(c) is not None for c in seen)
        assert len({space.index(c) for c in seen}) == len(space)
        with pytest.raises(SpaceExhaustedError):
            study.ask(space.distributions())

    def test_enqueued_trials_first_and_pending_ones_not_proposed(self, name):
        space = small_space()
        study = optuna.create_study(sampler=make_sampler(name, space, seed=2))
        default = {"tile": 32, "stages": 2, "layout": "row", "fast": True}
        study.enqueue_trial(default)
        study.enqueue_trial({"tile": 16})
        first = study.ask(space.distributions())
        assert first.params == default
        second = study.ask(space.distributions())
        assert second.params["tile"] == 16 and space.index(second.params) is not None
        third = study.ask(space.distributions())
        assert space.index(third.params) not in {space.index(default), space.index(second.params)}

    def test_resumed_study_with_failures_never_repeats(self, name, tmp_path):
        space = small_space()
        storage = f"sqlite:///{tmp_path / 'optuna.db'}"
        kwargs = {"study_name": "s", "storage": storage, "load_if_exists": True}
        study = optuna.create_study(sampler=make_sampler(name, space, seed=3), **kwargs)
        study.enqueue_trial({"tile": 64, "stages": 1, "layout": "row", "fast": True})
        seen = ask_tell(study, space, 8)
        resumed = optuna.create_study(sampler=make_sampler(name, space, seed=3), **kwargs)
        seen += ask_tell(resumed, space, 8)
        assert len({space.index(c) for c in seen}) == 16
        assert resumed.trials[0].state == TrialState.FAIL

    def test_replay_respects_budget_and_seed(self, name, tmp_path):
        rec = load_recording(write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS, synthetic_time))
        a = evaluate(rec, name, budget=25, seeds=[7])
        b = evaluate(rec, name, budget=25, seeds=[7])
        assert len(a.seeds[0].best_so_far) == 25
        np.testing.assert_array_equal(a.seeds[0].best_so_far, b.seeds[0].best_so_far)


@pytest.mark.parametrize("sampler_name", SAMPLER_NAMES)
class TestRegisteredSamplers(StrategyContract):
    @pytest.fixture
    def name(self, sampler_name):
        return sampler_name


def test_default_beats_random_on_a_smooth_space(tmp_path):
    rec = load_recording(write_cache(tmp_path / "s.json", SYNTHETIC_PARAMS, synthetic_time))
    ours = evaluate(rec, DEFAULT_SAMPLER, seeds=range(5))
    random = evaluate(rec, "random", seeds=range(5))
    assert ours.mean_score > random.mean_score + 0.3
    assert ours.median_trials_to(0.99) < random.median_trials_to(0.99)


def test_unknown_sampler_names_the_choices():
    with pytest.raises(UnknownSamplerError, match="choose one of"):
        make_sampler("nope", small_space(), seed=0)


def test_asking_with_other_distributions_is_rejected():
    space = small_space()
    study = optuna.create_study(sampler=make_sampler(DEFAULT_SAMPLER, space, seed=0))
    with pytest.raises(ValueError):
        study.ask({"tile": optuna.distributions.CategoricalDistribution([8, 16])})


def test_finite_space_from_predicate_or_config_list():
    space = small_space()
    listed = FiniteSpace.from_params(PARAMS, valid=[space.config(i) for i in range(len(space))])
    assert listed.configs == space.configs
    assert space.cartesian_size == 4 * 3 * 2 * 2 and len(space) == 40
    assert space.index({"tile": 64, "stages": 2, "layout": "row", "fast": False}) is None
    assert space.index({"tile": 64}) is None
    flags = FiniteSpace.from_params({"a": [0, 1], "b": [False, True]}, valid=lambda c: True)
    assert flags.config(flags.index({"a": 1, "b": True})) == {"a": 1, "b": True}
    assert flags.index({"a": True, "b": 1}) is None
    with pytest.raises(EmptySpaceError):
        FiniteSpace.from_params(PARAMS, valid=lambda c: False)
