"""The optuna sampler base every xe2tune strategy derives from: valid, never-repeated configs.

Optuna samplers see a product of independent distributions and know nothing of restrictions, so
a plain sampler wastes most proposals on invalid or already-measured configs. A
``FiniteSpaceSampler`` instead chooses one whole config, by index, among the valid configs of a
``FiniteSpace`` that the study has not evaluated, is not evaluating and has not queued. Subclasses
implement only ``_choose``; the study bookkeeping lives here once.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from optuna.samplers import BaseSampler
from optuna.trial import TrialState

from xe2tune.errors import Xe2TuneError

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.study import Study
    from optuna.trial import FrozenTrial

    from xe2tune.tuner._space import FiniteSpace

__all__ = ["FiniteSpaceSampler", "History", "SpaceExhaustedError"]

_FINISHED = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)


class SpaceExhaustedError(Xe2TuneError):
    """Every valid config of the space has been evaluated or is already queued."""


@dataclass(frozen=True)
class History:
    """What a study knows about the space, as config indices.

    ``indices[k]`` was evaluated with objective ``values[k]`` (NaN: the trial failed or was
    pruned). ``candidates`` is the boolean mask of the configs that may still be proposed.
    """

    indices: np.ndarray
    values: np.ndarray
    candidates: np.ndarray

    @property
    def ok(self) -> np.ndarray:
        """Mask over ``indices`` of the trials that produced a value."""
        return ~np.isnan(self.values)

    def incumbent(self) -> int | None:
        """Index of the best evaluated config, or None before the first success."""
        if not self.ok.any():
            return None
        return int(self.indices[int(np.nanargmin(self.values))])


class FiniteSpaceSampler(BaseSampler, abc.ABC):
    """Base sampler over a ``FiniteSpace``: one whole valid, unseen config per trial.

    Works with optuna's ask/tell and ``optimize`` alike, for a single objective to minimize:

    - ``infer_relative_search_space`` returns ``space.distributions()``; pass exactly those to
      ``study.ask`` (other distributions for the same names are rejected by optuna).
    - ``sample_relative`` is called by optuna the first time a trial needs a parameter that
      is not fixed. It reads the study's trials (COMPLETE with a value; FAIL and PRUNED as
      evaluated without one; RUNNING and WAITING, e.g. ``enqueue_trial``'d, as taken) and asks
      ``_choose`` for one of the remaining configs. Parameters fixed on the trial by
      ``enqueue_trial`` narrow the choice to the configs that agree with them. Fully fixed
      trials never reach the sampler.
    - Resumed studies (trials loaded from storage) are handled alike: the history is the study.

    Not thread-safe: one sampler per study and per thread (the tuner's loop is sequential).
    The sampler owns nothing it returns; histories are fresh arrays per call.
    """

    def __init__(self, space: FiniteSpace, seed: int | None = None) -> None:
        """Bind to ``space``; ``seed`` makes the sequence of choices reproducible."""
        self._space = space
        self._rng = np.random.default_rng(seed)
        self._done: dict[str, _Finished] = {}

    @property
    def space(self) -> FiniteSpace:
        """The space this sampler proposes from."""
        return self._space

    def reseed_rng(self) -> None:
        """Draw a fresh seed (optuna calls this for ``n_jobs > 1`` copies of the sampler)."""
        self._rng = np.random.default_rng()

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        """The space's distributions: every parameter is sampled jointly.

        Raises:
            ValueError: the study is multi-objective.
        """
        self._raise_error_if_multi_objective(study)
        return dict(self._space.distributions())

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """One valid config the study has not seen, as a params dict.

        Raises:
            SpaceExhaustedError: no valid config is left that agrees with the trial's fixed
                parameters.
        """
        if not search_space:
            return {}
        history = self.history(study, exclude=trial.number)
        fixed = trial.system_attrs.get("fixed_params", {})
        candidates = history.candidates & self._matching(fixed)
        if not candidates.any():
            raise SpaceExhaustedError(
                f"all {len(self._space)} valid configs are evaluated or queued"
                + (f" among those with {fixed}" if fixed else "")
            )
        history = History(history.indices, history.values, candidates)
        return self._space.config(self._choose(history, self._rng))

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        """Never used: every parameter of the space is sampled jointly.

        Raises:
            ValueError: always; ``param_name`` is not one of the space's parameters or was asked
                with a distribution other than ``space.distributions()[param_name]``.
        """
        raise ValueError(
            f"parameter {param_name!r} with {param_distribution} is not sampled by "
            f"{type(self).__name__}: ask with FiniteSpace.distributions() "
            f"(parameters {list(self._space.names)})"
        )

    def history(self, study: Study, exclude: int | None = None) -> History:
        """The study's trials as config indices, and the configs still open to proposal.

        Trials whose params are not a valid config of the space (e.g. from an older space)
        are ignored. ``exclude`` is a trial number to leave out (the one being sampled).
        """
        trials = study.get_trials(deepcopy=False)
        done = self._done.setdefault(study.study_name, _Finished(len(self._space)))
        done.absorb(trials, self._space)
        taken = done.taken.copy()
        indices, values = list(done.indices), list(done.values)
        for t in trials[done.count :]:
            if t.number == exclude:
                continue
            index, value = _index_value(t, self._space)
            if index is None:
                continue
            taken[index] = True
            if t.state in _FINISHED:
                indices.append(index)
                values.append(value)
        return History(np.array(indices, dtype=np.int64), np.array(values, dtype=float), ~taken)

    def _matching(self, fixed: dict[str, Any]) -> np.ndarray:
        mask = np.ones(len(self._space), dtype=bool)
        names = list(self._space.names)
        values = self._space.values
        for name, value in fixed.items():
            if name in names:
                equal = [j for j, v in enumerate(values[name]) if v == value]
                mask &= np.isin(self._space.ordinals[:, names.index(name)], equal)
        return mask

    @abc.abstractmethod
    def _choose(self, history: History, rng: np.random.Generator) -> int:
        """Pick the index of the next config; ``history.candidates`` has at least one True.

        Raises:
            Nothing on purpose: any exception is a bug and propagates through ``study.ask``.
        """


class _Finished:
    """The leading run of finished trials of one study, absorbed once (they never change).

    Keeps ``history`` linear in the number of new trials instead of in all trials.
    """

    def __init__(self, size: int) -> None:
        self.count = 0
        self.indices: list[int] = []
        self.values: list[float] = []
        self.taken = np.zeros(size, dtype=bool)

    def absorb(self, trials: list[FrozenTrial], space: FiniteSpace) -> None:
        while self.count < len(trials) and trials[self.count].state in _FINISHED:
            index, value = _index_value(trials[self.count], space)
            self.count += 1
            if index is not None:
                self.taken[index] = True
                self.indices.append(index)
                self.values.append(value)


def _index_value(t: FrozenTrial, space: FiniteSpace) -> tuple[int | None, float]:
    params = t.params if t.params else t.system_attrs.get("fixed_params", {})
    value = float("nan")
    if t.state == TrialState.COMPLETE and t.values is not None:
        value = float(t.values[0])
    return space.index(params), value
