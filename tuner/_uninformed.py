"""Strategies that ignore the values seen so far: random search and exhaustive (grid) search."""

from __future__ import annotations

import numpy as np

from xe2tune.tuner._finite_sampler import FiniteSpaceSampler, History

__all__ = ["ExhaustiveSampler", "RandomSampler"]


class RandomSampler(FiniteSpaceSampler):
    """Random search without replacement over the valid configs: the methodology's baseline."""

    def _choose(self, history: History, rng: np.random.Generator) -> int:
        return int(rng.choice(np.flatnonzero(history.candidates)))


class ExhaustiveSampler(FiniteSpaceSampler):
    """Every valid config once, in the space's order (the seed is irrelevant)."""

    def _choose(self, history: History, rng: np.random.Generator) -> int:
        return int(np.argmax(history.candidates))
