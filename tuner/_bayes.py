"""Bayesian optimization over a finite space: a GP on log time, expected improvement maximized
exactly over every remaining valid config.

Why this design (measured with benchmarks/strategies.py on the two shared recorded spaces;
methodology scores, mean of 20 seeds, convolution / pnpoly):

- The kernel can mix two views of a config. Ordered value positions alone (classic BO,
  ``gp-ordinal``) model smooth trends (pnpoly's tile size: 0.90) but not a single special value
  (convolution's isolated optimum at block_size_x = 32: 0.65-0.69). One-hot values alone find
  that needle but chase every block size on pnpoly (below 0). Their sum (``gp-mixed``, weights
  fitted by marginal likelihood) finds the needle (0.93) and is good on pnpoly on average,
  but in some seeds stays a hundred trials in a deceptive region there (scores down to -1.2).
- ``gp-portfolio`` (the default) lets the ordinal and the mixed model propose in turn, both
  fitted to every trial (measured with the mixed one first and an 11-config random start):
  0.88 / 0.91, with the worst seed at 0.42 / 0.65 (20 seeds); in the
  10-seed run of the full benchmark 0.916 / 0.903, worst seed 0.70 / 0.65, against Kernel
  Tuner's best strategy there, genetic_algorithm, at 0.772 / 0.459.
- A failed config is not a slow one: imputing the worst time for failures steered the search
  away from pnpoly's optimum (large tiles fail only with large blocks). Failures get a neutral
  (median) value and a separate failure-probability weight on EI instead.
- Hyperparameters are fitted thoroughly (100 Adam steps, then 40 per refit), first after the
  random start.
- The first trials matter most (a GPU trial costs seconds). The start is short: 2 random
  configs, not d + 1 (d varying parameters), and the ordinal model proposes first. Measured on
  the spaces where random search closes 95 % of the median-to-optimum gap within 12 (AMD W6600)
  and 37 (W7800) trials, with d + 1 = 11 random configs the GP had no trials left to act in.
  25 seeds, trial-count / time-based methodology score (``tuner._evaluate``), W6600; W7800:

  ========================================= ================ ===============
  random search                             -0.20 / -0.89    -0.28 / -0.24
  portfolio, mixed first, startup 11 (old)  0.25 / -0.27 *   -0.17 / 0.00 *
  portfolio, mixed first, startup 3         -0.10 / 0.29     0.10 / 0.23
  portfolio, mixed first, startup 2         -0.57 / 0.35     0.32 / 0.45
  portfolio, ordinal first, startup 2       0.01 / 0.21      0.11 / 0.30
  mixed first + a random member (1 in 3)    -0.10 / -0.43    -0.03 / 0.10
  ========================================= ================ ===============

  (* 10 seeds, single mixed GP; standard errors 0.1-0.5.) Mixed first with startup 2 is best on
  average, but on W6600 3 of 25 runs spent all 12 trials refining a slow first config (per-run
  trial-count scores -6 to -8, the mean below random search's); the ordinal model's smoother
  view moves away from a slow region sooner. Deferring the hyperparameter fit to d + 1 points
  (prior length scales until then) made it worse (-1.40 / 0.14), and so did a random member.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from xe2tune.tuner._finite_sampler import FiniteSpaceSampler, History
from xe2tune.tuner._gp import FiniteGP
from xe2tune.tuner._uninformed import RandomSampler

if TYPE_CHECKING:
    from xe2tune.tuner._space import FiniteSpace

__all__ = ["ENCODINGS", "GPSampler", "expected_improvement", "normal_cdf"]


def _ordinal(space: FiniteSpace) -> tuple[np.ndarray, np.ndarray]:
    """Each value's position in its parameter's list, scaled to [0, 1]: neighbours alike.

    One length scale per parameter.
    """
    sizes = np.array([len(space.values[n]) for n in space.names], dtype=float)
    keep = sizes > 1
    return space.ordinals[:, keep] / (sizes[keep] - 1.0), np.arange(int(keep.sum()))


def _onehot(space: FiniteSpace) -> tuple[np.ndarray, np.ndarray]:
    """One column per value, scaled so that two differing values are at distance 1.

    One length scale per parameter: any two of its values are equally different (a
    categorical kernel), so a single value can stand out without every value needing its own
    hyperparameter.
    """
    columns, groups = [], []
    for j, n in enumerate(space.names):
        size = len(space.values[n])
        if size > 1:
            columns.append(np.eye(size)[space.ordinals[:, j]] / math.sqrt(2.0))
            groups.append(np.full(size, len(groups)))
    if not columns:
        return np.zeros((len(space), 0)), np.zeros(0, dtype=np.int64)
    return np.hstack(columns), np.concatenate(groups)


ENCODINGS = {"ordinal": _ordinal, "onehot": _onehot}
"""How configs become GP features: ordered value positions, or one indicator per value."""


def normal_cdf(z: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz & Stegun 26.2.17, absolute error < 7.5e-8)."""
    t = 1.0 / (1.0 + 0.2316419 * np.abs(z))
    poly = t * (
        0.319381530 + t * (-0.356563782 + t * (1.781477937 + t * (-1.821255978 + t * 1.330274429)))
    )
    tail = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) * poly
    return np.where(z >= 0, 1.0 - tail, tail)


def expected_improvement(mean: np.ndarray, var: np.ndarray, best: float) -> np.ndarray:
    """EI of minimization below ``best`` for a Gaussian posterior (mean, var)."""
    sd = np.sqrt(var) + 1e-12
    z = (best - mean) / sd
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (best - mean) * normal_cdf(z) + sd * pdf


class GPSampler(FiniteSpaceSampler):
    """GP-EI: random configs until ``startup`` succeed, then the config of highest EI.

    The model is a GP on standardized log time over the configs encoded as ``encodings``
    (one additive kernel component per encoding: "ordinal" lets neighbouring values of a
    parameter behave alike, "onehot" lets single values stand out, as a tile size that maps
    well onto the hardware does). EI is maximized exactly over every remaining valid config and
    weighted by the estimated chance that the config does not fail. ``startup`` defaults to
    the number of parameters that vary, plus one. Hyperparameters are refitted whenever the
    number of observations has grown by ``refit_growth`` since the last fit.
    """

    def __init__(
        self,
        space: FiniteSpace,
        seed: int | None = None,
        *,
        encodings: tuple[str, ...] = ("ordinal", "onehot"),
        startup: int | None = None,
        refit_growth: float = 1.15,
    ) -> None:
        """Bind to ``space``; see the class docstring for the options."""
        super().__init__(space, seed)
        varying = sum(len(v) > 1 for v in space.values.values())
        self._encodings = encodings
        self._startup = varying + 1 if startup is None else startup
        self._growth = refit_growth
        self._gp: FiniteGP | None = None
        self._next_fit = 0

    def _choose(self, history: History, rng: np.random.Generator) -> int:
        if int(history.ok.sum()) < self._startup:
            return int(rng.choice(np.flatnonzero(history.candidates)))
        return int(np.argmax(self.acquisition(history, rng)))

    def acquisition(self, history: History, rng: np.random.Generator) -> np.ndarray:
        """EI of every config under the model of ``history`` (-inf where not a candidate).

        EI is weighted by the chance that the config does not fail, estimated from the same
        posterior applied to the failure indicators (a least-squares classifier).
        """
        gp, values = self._model(history, rng)
        failed = ~np.isfinite(values)
        y = _targets(values)
        if len(gp.rows) >= self._next_fit:
            gp.fit(y)
            self._next_fit = math.ceil(len(gp.rows) * self._growth)
        rate = failed.mean()
        means, var = gp.predict(np.column_stack([y, failed - rate]))
        ei = expected_improvement(means[0], var, float(y[~failed].min()))
        if failed.any():
            ei *= np.clip(1.0 - rate - means[1], 0.01, 1.0)
        ei[~history.candidates] = -np.inf
        return ei

    def _model(self, history: History, rng: np.random.Generator) -> tuple[FiniteGP, np.ndarray]:
        if self._gp is None:
            blocks = [ENCODINGS[e](self.space) for e in self._encodings]
            blocks = [b for b in blocks if b[0].shape[1]] or [
                (np.zeros((len(self.space), 1)), np.zeros(1, dtype=np.int64))
            ]
            self._gp = FiniteGP(blocks, rng)
        gp = self._gp
        value_of = dict(zip(history.indices.tolist(), history.values.tolist(), strict=True))
        seen = set(gp.rows)
        for index in value_of:
            if index not in seen:
                gp.observe(index)
                seen.add(index)
        return gp, np.array([value_of.get(r, math.nan) for r in gp.rows])


def _targets(values: np.ndarray) -> np.ndarray:
    """Standardized values; failed ones (NaN) take the median observed value.

    A failure says nothing about how fast the config's neighbours are (a kernel that runs out
    of registers at a large tile is often fastest at the next smaller one), so it is scored as
    typical; the failure model keeps the search away from configs likely to fail.

    Times are modelled on a log scale (their spread is multiplicative); an objective that is
    not positive everywhere is modelled as is.
    """
    ok = np.isfinite(values)
    y = values.copy()
    if (y[ok] > 0).all():
        y[ok] = np.log(y[ok])
    y[~ok] = np.median(y[ok])
    sd = y.std()
    return (y - y.mean()) / (sd if sd > 0 else 1.0)


MEMBERS = {
    "mixed": ("ordinal", "onehot"),
    "ordinal": ("ordinal",),
    "random": None,
}
"""Portfolio members: a GP on these encodings, or random search (None)."""


class PortfolioSampler(FiniteSpaceSampler):
    """Round robin over members that differ in their model, all fed the same history.

    Each member proposes in turn from its own model of every trial so far: a model whose
    inductive bias misleads it on a space (e.g. one-hot values chasing every block size) only
    gets its share of the proposals, while a model that fits the space well still drives the
    search. A random member keeps a misled model from spending a whole small budget in one
    slow region (see the module docstring).
    """

    def __init__(
        self,
        space: FiniteSpace,
        seed: int | None = None,
        *,
        members: tuple[str, ...] = ("ordinal", "mixed"),
        startup: int = 2,
    ) -> None:
        """Bind to ``space``; ``members`` are names of ``MEMBERS``, each GP with ``startup``
        random configs first (see the module docstring for why 2)."""
        super().__init__(space, seed)
        self._members: list[FiniteSpaceSampler] = [
            RandomSampler(space, seed) if MEMBERS[m] is None
            else GPSampler(space, seed, encodings=MEMBERS[m], startup=startup)
            for m in members
        ]
        self._turn = 0

    def _choose(self, history: History, rng: np.random.Generator) -> int:
        member = self._members[self._turn % len(self._members)]
        self._turn += 1
        return member._choose(history, rng)
