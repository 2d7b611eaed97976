"""Bayesian optimization over a finite space: a GP on log time, expected improvement maximized
exactly over every remaining valid config."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from xe2tune.tuner._finite_sampler import FiniteSpaceSampler, History
from xe2tune.tuner._gp import FiniteGP

if TYPE_CHECKING:
    from xe2tune.tuner._space import FiniteSpace

__all__ = ["GPSampler", "features"]



def features(space: FiniteSpace) -> np.ndarray:
    """Each config as its parameters' value positions scaled to [0, 1] (constant ones dropped).

    Neighbouring values of a parameter are taken to behave alike, which holds for the numeric
    and boolean parameters of kernel spaces; string values keep their listed order.
    """
    ordinals = space.ordinals.astype(float)
    sizes = np.array([len(space.values[n]) for n in space.names], dtype=float)
    keep = sizes > 1
    if not keep.any():
        return np.zeros((len(space), 1))
    return ordinals[:, keep] / (sizes[keep] - 1.0)


def normal_cdf(z: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz & Stegun 26.2.17, absolute error < 7.5e-8)."""
    t = 1.0 / (1.0 + 0.2316419 * np.abs(z))
    poly = t * (0.319381530 + t * (-0.356563782 + t * (1.781477937 + t * (-1.821255978 + t * 1.330274429))))
    tail = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) * poly
    return np.where(z >= 0, 1.0 - tail, tail)


def expected_improvement(mean: np.ndarray, var: np.ndarray, best: float) -> np.ndarray:
    """EI of minimization below ``best`` for a Gaussian posterior (mean, var)."""
    sd = np.sqrt(var) + 1e-12
    z = (best - mean) / sd
    cdf = normal_cdf(z)
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (best - mean) * cdf + sd * pdf


class GPSampler(FiniteSpaceSampler):
    """GP-EI: random configs until ``startup`` succeed, then the config of highest EI.

    The model is a GP on standardized log time (failed configs are given the worst observed
    value so the model steers away from them). Hyperparameters are refitted whenever the
    number of observations has grown by ``refit_growth`` since the last fit.
    """

    def __init__(
        self,
        space: FiniteSpace,
        seed: int | None = None,
        *,
        startup: int = 5,
        refit_growth: float = 1.2,
    ) -> None:
        """Bind to ``space``; ``startup`` random successes precede the model."""
        super().__init__(space, seed)
        self._startup = startup
        self._growth = refit_growth
        self._gp: FiniteGP | None = None
        self._next_fit = 0

    def _choose(self, history: History, rng: np.random.Generator) -> int:
        if int(history.ok.sum()) < self._startup:
            return int(rng.choice(np.flatnonzero(history.candidates)))
        gp, y = self._model(history, rng)
        mean, var = gp.predict(y)
        ok = np.isfinite(self._last_values)
        ei = expected_improvement(mean, var, float(y[ok].min()))
        ei[~history.candidates] = -np.inf
        return int(np.argmax(ei))

    def _model(self, history: History, rng: np.random.Generator) -> tuple[FiniteGP, np.ndarray]:
        if self._gp is None:
            self._gp = FiniteGP(features(self.space), rng)
        gp = self._gp
        value_of = dict(zip(history.indices.tolist(), history.values.tolist()))
        seen = set(gp.rows)
        for index in value_of:
            if index not in seen:
                gp.observe(index)
                seen.add(index)
        values = np.array([value_of.get(r, math.nan) for r in gp.rows])
        self._last_values = values
        y = _targets(values)
        if len(gp.rows) >= self._next_fit:
            gp.fit(y)
            self._next_fit = math.ceil(len(gp.rows) * self._growth)
        return gp, y


def _targets(values: np.ndarray) -> np.ndarray:
    """Standardized log values; failed ones (NaN) take the worst observed value."""
    logs = np.log(np.where(np.isfinite(values), np.maximum(values, 1e-300), np.nan))
    ok = np.isfinite(logs)
    logs[~ok] = logs[ok].max()
    sd = logs.std()
    return (logs - logs.mean()) / (sd if sd > 0 else 1.0)
