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

__all__ = ["ENCODINGS", "GPSampler", "expected_improvement", "normal_cdf"]


def _ordinal(space: FiniteSpace) -> np.ndarray:
    """Each value's position in its parameter's list, scaled to [0, 1]: neighbours alike."""
    sizes = np.array([len(space.values[n]) for n in space.names], dtype=float)
    keep = sizes > 1
    return space.ordinals[:, keep] / (sizes[keep] - 1.0)


def _onehot(space: FiniteSpace) -> np.ndarray:
    """One column per value (scaled so that two differing values are at distance 1)."""
    columns = [
        np.eye(len(space.values[n]))[space.ordinals[:, j]] / math.sqrt(2.0)
        for j, n in enumerate(space.names)
        if len(space.values[n]) > 1
    ]
    return np.hstack(columns) if columns else np.zeros((len(space), 0))


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
    (one additive kernel component per encoding). Failed configs get the worst observed value,
    so the model steers away from them. Hyperparameters are refitted whenever the number of
    observations has grown by ``refit_growth`` since the last fit. With ``local_every = k``,
    every k-th choice is restricted to the incumbent's unevaluated neighbours (configs that
    differ in one parameter), when it has any.
    """

    def __init__(
        self,
        space: FiniteSpace,
        seed: int | None = None,
        *,
        encodings: tuple[str, ...] = ("ordinal", "onehot"),
        startup: int = 5,
        refit_growth: float = 1.25,
        transform: str = "log",
        local_every: int = 0,
        box_every: int = 0,
        box_top: int = 5,
    ) -> None:
        """Bind to ``space``; see the class docstring for the options."""
        super().__init__(space, seed)
        self._encodings = encodings
        self._startup = startup
        self._growth = refit_growth
        self._transform = transform
        self._local_every = local_every
        self._box_every = box_every
        self._box_top = box_top
        self._gp: FiniteGP | None = None
        self._next_fit = 0
        self._steps = 0

    def _choose(self, history: History, rng: np.random.Generator) -> int:
        if int(history.ok.sum()) < self._startup:
            return int(rng.choice(np.flatnonzero(history.candidates)))
        ei = self.acquisition(history, rng)
        self._steps += 1
        if self._box_every and self._steps % self._box_every == 0:
            box = self._box(history) & history.candidates
            if box.any():
                return int(np.argmax(np.where(box, ei, -np.inf)))
        if self._local_every and self._steps % self._local_every == 0:
            ordinals = self.space.ordinals
            incumbent = ordinals[history.incumbent()]
            near = ((ordinals != incumbent).sum(1) == 1) & history.candidates
            if near.any():
                return int(np.argmax(np.where(near, ei, -np.inf)))
        return int(np.argmax(ei))

    def _box(self, history: History) -> np.ndarray:
        """Configs made only of parameter values seen in the best ``box_top`` configs."""
        ok = history.ok
        order = np.argsort(np.where(ok, history.values, np.inf), kind="stable")
        top = history.indices[order[: min(self._box_top, int(ok.sum()))]]
        ordinals = self.space.ordinals
        inside = np.ones(len(self.space), dtype=bool)
        for j in range(ordinals.shape[1]):
            inside &= np.isin(ordinals[:, j], ordinals[top, j])
        return inside

    def acquisition(self, history: History, rng: np.random.Generator) -> np.ndarray:
        """EI of every config under the model of ``history`` (-inf where not a candidate).

        EI is weighted by the chance that the config does not fail, estimated from the same
        posterior applied to the failure indicators (a least-squares classifier).
        """
        gp, values = self._model(history, rng)
        failed = ~np.isfinite(values)
        y = _targets(values) if self._transform == "log" else _normal_scores(values)
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
            blocks = [b for b in blocks if b.shape[1]] or [np.zeros((len(self.space), 1))]
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


def _normal_scores(values: np.ndarray) -> np.ndarray:
    """Gaussian-copula targets: each value's rank mapped to a standard normal quantile."""
    ok = np.isfinite(values)
    filled = np.where(ok, values, np.median(values[ok]))
    ranks = np.argsort(np.argsort(filled, kind="stable"), kind="stable")
    return normal_quantile((ranks + 0.5) / len(filled))


def normal_quantile(p: np.ndarray) -> np.ndarray:
    """Inverse standard normal CDF (Acklam's rational approximation, rel. error < 1.2e-9)."""
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    p = np.asarray(p, dtype=float)
    q = np.minimum(p, 1.0 - p)
    tail = q < 0.02425
    r = np.sqrt(-2.0 * np.log(np.where(tail, q, 0.5)))
    x_tail = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / (
        (((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1.0
    )
    u = p - 0.5
    t = u * u
    x_mid = (
        (((((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4]) * t + a[5])
        * u
        / (((((b[0] * t + b[1]) * t + b[2]) * t + b[3]) * t + b[4]) * t + 1.0)
    )
    x_tail = np.where(p < 0.5, x_tail, -x_tail)
    return np.where(tail, x_tail, x_mid)
