"""TPE over a finite space: the density ratio l(x) / g(x) evaluated on every remaining config.

Optuna's TPE samples from l and ranks a few dozen draws; on a finite, enumerated space the ratio
can instead be maximized exactly. Both densities are multivariate Parzen estimators with
Aitchison-Aitken kernels per parameter (weight ``1 - eps`` on the observed value, the rest spread
over the others), so interactions between parameters are kept, as in optuna's multivariate TPE.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from xe2tune.tuner._finite_sampler import FiniteSpaceSampler, History

if TYPE_CHECKING:
    from xe2tune.tuner._space import FiniteSpace

__all__ = ["FiniteTPESampler"]

_BAD_POINTS = 100
"""Most observations the "bad" density g is built from (a random subset beyond that)."""


class FiniteTPESampler(FiniteSpaceSampler):
    """Multivariate TPE maximizing l/g exactly over the remaining configs.

    Random configs until ``startup`` succeed; then the best ``gamma(n) = min(ceil(0.1 n), 25)``
    observations (optuna's default split) form l, the rest (failed ones included) form g.
    """

    def __init__(self, space: FiniteSpace, seed: int | None = None, *, startup: int = 10) -> None:
        """Bind to ``space``; ``startup`` random successes precede the model."""
        super().__init__(space, seed)
        self._startup = startup
        sizes = [len(space.values[n]) for n in space.names]
        self._offsets = np.cumsum([0, *sizes[:-1]])
        self._sizes = np.array(sizes)
        codes = space.ordinals + self._offsets  # column of each value in a one-hot layout
        self._codes = codes
        self._onehot = np.zeros((len(space), int(self._sizes.sum())), dtype=np.float32)
        np.put_along_axis(self._onehot, codes, 1.0, axis=1)

    def _choose(self, history: History, rng: np.random.Generator) -> int:
        ok = history.ok
        if int(ok.sum()) < self._startup:
            return int(rng.choice(np.flatnonzero(history.candidates)))
        order = np.argsort(np.where(ok, history.values, np.inf), kind="stable")
        n_good = min(math.ceil(0.1 * int(ok.sum())), 25)
        good, bad = history.indices[order[:n_good]], history.indices[order[n_good:]]
        if len(bad) > _BAD_POINTS:
            bad = rng.choice(bad, _BAD_POINTS, replace=False)
        ratio = self._log_density(good) - self._log_density(bad)
        ratio += 1e-9 * rng.random(len(ratio))  # break ties at random, not by index
        ratio[~history.candidates] = -np.inf
        return int(np.argmax(ratio))

    def _log_density(self, rows: np.ndarray) -> np.ndarray:
        """log of the Parzen mixture over ``rows`` at every config (0 if there are none)."""
        if len(rows) == 0:
            return np.zeros(len(self.space))
        eps = 1.0 / (1.0 + len(rows))
        same = np.log1p(-eps * (self._sizes - 1) / self._sizes)
        other = np.log(eps / self._sizes)
        centres = np.zeros((len(rows), self._onehot.shape[1]), dtype=np.float32)
        for j in range(len(self._sizes)):
            centres[np.arange(len(rows)), self._codes[rows, j]] = same[j] - other[j]
        logk = self._onehot @ centres.T + other.sum()
        top = logk.max(axis=1, keepdims=True)
        return (top[:, 0] + np.log(np.exp(logk - top).mean(axis=1))).astype(float)
