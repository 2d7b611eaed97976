"""A small Gaussian-process model over a finite set of points, in numpy only.

The kernel is a sum of Matern-5/2 components, one per feature block (e.g. parameter values as
ordered positions, and the same values one-hot): each block has its own signal variance and
ARD length scales, so the marginal likelihood decides how much of the response is a smooth
trend and how much belongs to individual values.

The search spaces are finite and enumerated, so the posterior is kept for *every* point at once
and updated by one rank-one step per observation (O(n N) for n observations and N points)
instead of being recomputed (O(n^2 N)). Hyperparameters are fitted by maximizing the log
marginal likelihood with Adam on analytic gradients, now and then, on at most ``FIT_POINTS``
observations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["FIT_POINTS", "FiniteGP"]

FIT_POINTS = 200
"""Most observations used to fit hyperparameters (a random subset beyond that)."""
FIRST_STEPS = 100
"""Adam steps of the first fit; later fits start from the previous hyperparameters."""
REFIT_STEPS = 40

_SQRT5 = math.sqrt(5.0)
_LENGTH = (math.log(0.05), math.log(20.0), math.log(0.5))  # bounds and prior centre, log scale
_SIGNAL = (-6.0, 3.0)
_NOISE = (math.log(1e-6), 0.0)


class FiniteGP:
    """GP posterior over all N points, given as feature blocks (N x d_b each, scaled to [0, 1]).

    Usage: ``observe(i)`` adds point i to the training set (its target comes later),
    ``fit(y)`` refits hyperparameters to the current targets, ``predict(y)`` gives the posterior
    mean and variance at every point for targets ``y`` (one per observed point, in ``rows``
    order, standardized by the caller). Targets may change between calls (e.g. imputed values
    for failed configs); only the observed points and the hyperparameters define the cache.
    """

    def __init__(
        self, blocks: Sequence[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator
    ) -> None:
        """``blocks``: (features N x d, group of each feature): features of a group share one
        length scale (e.g. the one-hot columns of one parameter)."""
        self._blocks = [np.asarray(f, dtype=float) for f, _ in blocks]
        self._groups = [np.asarray(g, dtype=np.int64) for _, g in blocks]
        self._rng = rng
        self._n_points = self._blocks[0].shape[0]
        self.log_lengths = [np.full(int(g.max()) + 1, _LENGTH[2]) for g in self._groups]
        self.log_signals = np.full(len(self._blocks), -math.log(len(self._blocks)))
        self.log_noise = math.log(1e-3)
        self._fitted = False
        self._rows: list[int] = []
        self._kinv = np.zeros((16, 16))
        self._kxc = np.zeros((16, self._n_points), dtype=np.float32)
        self._var = np.full(self._n_points, self._prior_var())
        self._scale()

    @property
    def rows(self) -> list[int]:
        """Observed point indices, in order."""
        return list(self._rows)

    def observe(self, row: int) -> None:
        """Condition on one more point: a Schur-complement update of K^-1 and the variances."""
        k_all = self._k_column(row)
        n = len(self._rows)
        if n == self._kinv.shape[0]:
            self._grow(2 * n)
        kinv, kxc = self._kinv[:n, :n], self._kxc[:n]
        k_old = k_all[self._rows]
        u = kinv @ k_old
        schur = max(self._prior_var() + math.exp(self.log_noise) - k_old @ u, 1e-12)
        cov = k_all - u.astype(np.float32) @ kxc
        self._var = np.maximum(self._var - cov * cov / schur, 0.0)
        kinv += np.outer(u, u) / schur
        self._kinv[:n, n] = self._kinv[n, :n] = -u / schur
        self._kinv[n, n] = 1.0 / schur
        self._kxc[n] = k_all
        self._rows.append(row)

    def predict(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance (of the latent function) at every point.

        ``y`` may hold several target vectors as columns (n x m): the means are then m x N,
        computed in one pass over the cached kernel matrix.
        """
        n = len(self._rows)
        alpha = (self._kinv[:n, :n] @ y).astype(np.float32)
        return (alpha.T @ self._kxc[:n]).astype(float), self._var

    def fit(self, y: np.ndarray) -> None:
        """Refit hyperparameters to (observed points, ``y``), then rebuild the cached posterior."""
        rows = np.array(self._rows)
        pick = np.arange(len(rows))
        if len(rows) > FIT_POINTS:
            pick = np.sort(self._rng.choice(len(rows), FIT_POINTS, replace=False))
        xs, t = [b[rows[pick]] for b in self._blocks], y[pick]
        theta, lo, hi = self._pack()
        steps = REFIT_STEPS if self._fitted else FIRST_STEPS
        self._fitted = True
        self._unpack(_adam(theta, steps, lo, hi, list(zip(xs, self._groups, strict=True)), t))
        self._scale()
        self._rebuild()

    def _pack(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        theta = np.concatenate([*self.log_lengths, self.log_signals, [self.log_noise]])
        d = sum(len(ll) for ll in self.log_lengths)
        lo = np.concatenate([np.full(d, _LENGTH[0]), np.full(len(self._blocks), _SIGNAL[0])])
        hi = np.concatenate([np.full(d, _LENGTH[1]), np.full(len(self._blocks), _SIGNAL[1])])
        return theta, np.append(lo, _NOISE[0]), np.append(hi, _NOISE[1])

    def _unpack(self, theta: np.ndarray) -> None:
        start = 0
        for i, ll in enumerate(self.log_lengths):
            self.log_lengths[i] = theta[start : start + len(ll)].copy()
            start += len(ll)
        self.log_signals = theta[start : start + len(self._blocks)].copy()
        self.log_noise = float(theta[-1])

    def _prior_var(self) -> float:
        return float(np.exp(self.log_signals).sum())

    def _scale(self) -> None:
        self._scaled = [
            b / np.exp(ll)[g]
            for b, g, ll in zip(self._blocks, self._groups, self.log_lengths, strict=True)
        ]
        self._norms = [(s * s).sum(1) for s in self._scaled]

    def _k_column(self, row: int) -> np.ndarray:
        k = np.zeros(self._n_points)
        for s, norms, log_signal in zip(self._scaled, self._norms, self.log_signals, strict=True):
            r = _distances(s[row : row + 1], norms[row : row + 1], s, norms)[0]
            k += math.exp(log_signal) * _matern(r)
        return k

    def _grow(self, capacity: int) -> None:
        n = len(self._rows)
        kinv = np.zeros((capacity, capacity))
        kinv[:n, :n] = self._kinv[:n, :n]
        kxc = np.zeros((capacity, self._n_points), dtype=np.float32)
        kxc[:n] = self._kxc[:n]
        self._kinv, self._kxc = kinv, kxc

    def _rebuild(self) -> None:
        n = len(self._rows)
        self._grow(max(16, 2 * n))
        kxc = np.zeros((n, self._n_points))
        for s, norms, log_signal in zip(self._scaled, self._norms, self.log_signals, strict=True):
            r = _distances(s[self._rows], norms[self._rows], s, norms)
            kxc += math.exp(log_signal) * _matern(r)
        k = kxc[:, self._rows] + math.exp(self.log_noise) * np.eye(n)
        kinv = np.linalg.inv(k)
        self._kinv[:n, :n] = kinv
        self._kxc[:n] = kxc
        explained = np.einsum("ij,ij->j", kinv @ kxc, kxc)
        self._var = np.maximum(self._prior_var() - explained, 0.0)


def _distances(
    a: np.ndarray, a_norms: np.ndarray, b: np.ndarray, b_norms: np.ndarray
) -> np.ndarray:
    """Euclidean distances between the rows of ``a`` and ``b``, given their squared norms."""
    d = a_norms[:, None] + b_norms[None, :] - 2.0 * (a @ b.T)
    return np.sqrt(np.maximum(d, 0.0))


def _matern(r: np.ndarray) -> np.ndarray:
    return (1.0 + _SQRT5 * r + (5.0 / 3.0) * r * r) * np.exp(-_SQRT5 * r)


def _adam(
    theta: np.ndarray,
    steps: int,
    lo: np.ndarray,
    hi: np.ndarray,
    xs: list[tuple[np.ndarray, np.ndarray]],
    y: np.ndarray,
) -> np.ndarray:
    """Maximize the penalized log marginal likelihood from ``theta``; the best iterate seen."""
    theta = theta.copy()
    best, best_value = theta.copy(), -math.inf
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, steps + 1):
        result = _lml_grad(theta, xs, y)
        if result is None:
            break
        value, grad = result
        if value > best_value:
            best, best_value = theta.copy(), value
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        theta += 0.1 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
        np.clip(theta, lo, hi, out=theta)
    return best


def _lml_grad(
    theta: np.ndarray, xs: list[tuple[np.ndarray, np.ndarray]], y: np.ndarray
) -> tuple[float, np.ndarray] | None:
    """Log marginal likelihood plus a weak log-normal prior on the lengths, and its gradient.

    ``xs`` holds (features, feature groups) per block; ``theta`` = (log length of every group
    of every block, log signal per block, log noise). None if the kernel matrix is not
    positive definite.
    """
    n = len(y)
    parts, start = [], 0
    k = math.exp(theta[-1]) * np.eye(n)
    signals = theta[-1 - len(xs) : -1]
    for (x, groups), log_signal in zip(xs, signals, strict=True):
        n_groups = int(groups.max()) + 1
        xs_b = x / np.exp(theta[start : start + n_groups])[groups]
        norms = (xs_b * xs_b).sum(1)
        r = _distances(xs_b, norms, xs_b, norms)
        e = np.exp(-_SQRT5 * r)
        kf = math.exp(log_signal) * (1.0 + _SQRT5 * r + (5.0 / 3.0) * r * r) * e
        k += kf
        parts.append((xs_b, groups, n_groups, r, e, kf, log_signal))
        start += n_groups
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return None
    chol_inv = np.linalg.inv(chol)
    kinv = chol_inv.T @ chol_inv
    alpha = kinv @ y
    w = np.outer(alpha, alpha) - kinv
    grads, g_signals = [], []
    for xs_b, groups, n_groups, r, e, kf, log_signal in parts:
        a = w * (math.exp(log_signal) * (5.0 / 3.0) * (1.0 + _SQRT5 * r) * e)
        per_feature = a.sum(1) @ (xs_b * xs_b) - (xs_b * (a @ xs_b)).sum(0)
        grads.append(np.bincount(groups, weights=per_feature, minlength=n_groups))
        g_signals.append(0.5 * float((w * kf).sum()))
    prior = theta[:start] - _LENGTH[2]
    value = -0.5 * float(y @ alpha) - float(np.log(np.diag(chol)).sum()) - (prior @ prior) / 8.0
    g_len = np.concatenate(grads) - prior / 4.0
    g_noise = 0.5 * math.exp(theta[-1]) * float(np.trace(w))
    return value, np.concatenate([g_len, g_signals, [g_noise]])
