"""A small Gaussian-process model over a finite set of points, in numpy only.

The search spaces are finite and enumerated, so the posterior is kept for *every* config at
once and updated by one rank-one step per observation (O(n N) for n observations and N
configs) instead of being recomputed (O(n^2 N)). Hyperparameters (ARD Matern-5/2 length
scales, signal and noise variance) are fitted by maximizing the log marginal likelihood with
Adam on analytic gradients, now and then, on at most ``FIT_POINTS`` observations.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["FIT_POINTS", "FiniteGP", "matern52"]

FIT_POINTS = 200
"""Most observations used to fit hyperparameters (a random subset beyond that)."""

_SQRT5 = math.sqrt(5.0)
_LOG_BOUNDS = {"length": (math.log(0.05), math.log(20.0)), "noise": (math.log(1e-6), 0.0)}


def matern52(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Matern-5/2 correlation between the rows of ``a`` and ``b`` (unit signal variance)."""
    r = np.sqrt(_scaled_sq_dist(a, b, lengths))
    return (1.0 + _SQRT5 * r + (5.0 / 3.0) * r * r) * np.exp(-_SQRT5 * r)


def _scaled_sq_dist(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    sa, sb = a / lengths, b / lengths
    d = (sa * sa).sum(1)[:, None] + (sb * sb).sum(1)[None, :] - 2.0 * sa @ sb.T
    return np.maximum(d, 0.0)


class FiniteGP:
    """GP posterior over all rows of ``points`` (N x d, features scaled to [0, 1]).

    Usage: ``observe(i)`` adds row i to the training set (its target comes later), ``fit(y)``
    refits hyperparameters on the current targets, ``predict(y)`` gives the posterior mean
    and variance at every row for targets ``y`` (one per observed row, standardized by the
    caller). Targets may change between calls (e.g. imputed values for failed configs); only
    the observed rows and hyperparameters define the cached state.
    """

    def __init__(self, points: np.ndarray, rng: np.random.Generator) -> None:
        self._points = points
        self._rng = rng
        d = points.shape[1]
        self.log_lengths = np.full(d, math.log(0.5))
        self.log_signal = 0.0
        self.log_noise = math.log(1e-3)
        self._rows: list[int] = []
        self._kinv = np.zeros((16, 16))
        self._kcx = np.zeros((points.shape[0], 16))
        self._var = np.full(points.shape[0], 1.0)

    @property
    def rows(self) -> list[int]:
        """Observed row indices, in order."""
        return list(self._rows)

    def observe(self, row: int) -> None:
        """Condition on one more row: a Schur-complement update of K^-1 and the variances."""
        signal, noise = math.exp(self.log_signal), math.exp(self.log_noise)
        lengths = np.exp(self.log_lengths)
        k_all = signal * matern52(self._points, self._points[row : row + 1], lengths)[:, 0]
        n = len(self._rows)
        if n == self._kinv.shape[0]:
            self._grow(2 * n)
        kinv, kcx = self._kinv[:n, :n], self._kcx[:, :n]
        k_old = k_all[self._rows]
        u = kinv @ k_old
        schur = max(signal + noise - k_old @ u, 1e-12)
        cov = k_all - kcx @ u
        self._var = np.maximum(self._var - cov * cov / schur, 0.0)
        kinv += np.outer(u, u) / schur
        self._kinv[:n, n] = self._kinv[n, :n] = -u / schur
        self._kinv[n, n] = 1.0 / schur
        self._kcx[:, n] = k_all
        self._rows.append(row)

    def predict(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance (of the latent function) at every row."""
        n = len(self._rows)
        return self._kcx[:, :n] @ (self._kinv[:n, :n] @ y), self._var

    def _grow(self, capacity: int) -> None:
        n = len(self._rows)
        kinv = np.zeros((capacity, capacity))
        kinv[:n, :n] = self._kinv[:n, :n]
        kcx = np.zeros((self._kcx.shape[0], capacity))
        kcx[:, :n] = self._kcx[:, :n]
        self._kinv, self._kcx = kinv, kcx

    def fit(self, y: np.ndarray, steps: int = 60) -> None:
        """Refit hyperparameters to (observed rows, ``y``), then rebuild the cached posterior."""
        rows = np.array(self._rows)
        pick = np.arange(len(rows))
        if len(rows) > FIT_POINTS:
            pick = np.sort(self._rng.choice(len(rows), FIT_POINTS, replace=False))
        x, t = self._points[rows[pick]], y[pick]
        theta = np.concatenate([self.log_lengths, [self.log_signal, self.log_noise]])
        m, v = np.zeros_like(theta), np.zeros_like(theta)
        lo = np.concatenate([np.full(len(self.log_lengths), _LOG_BOUNDS["length"][0]), [-3, -14]])
        hi = np.concatenate([np.full(len(self.log_lengths), _LOG_BOUNDS["length"][1]), [3, 0]])
        for step in range(1, steps + 1):
            grad = _lml_grad(theta, x, t)
            if grad is None:
                break
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad * grad
            theta = theta + 0.1 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
            theta = np.clip(theta, lo, hi)
        self.log_lengths, self.log_signal, self.log_noise = theta[:-2], theta[-2], theta[-1]
        self._rebuild()

    def _rebuild(self) -> None:
        signal, noise = math.exp(self.log_signal), math.exp(self.log_noise)
        lengths = np.exp(self.log_lengths)
        n = len(self._rows)
        x = self._points[self._rows]
        self._grow(max(16, 2 * n))
        kinv = np.linalg.inv(signal * matern52(x, x, lengths) + noise * np.eye(n))
        kcx = signal * matern52(self._points, x, lengths)
        self._kinv[:n, :n] = kinv
        self._kcx[:, :n] = kcx
        self._var = np.maximum(signal - np.einsum("ij,ij->i", kcx @ kinv, kcx), 0.0)


def _lml_grad(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Gradient of the log marginal likelihood (plus a weak log-normal prior on lengths)."""
    lengths = np.exp(theta[:-2])
    signal, noise = math.exp(theta[-2]), math.exp(theta[-1])
    r = np.sqrt(_scaled_sq_dist(x, x, lengths))
    e = np.exp(-_SQRT5 * r)
    kf = signal * (1.0 + _SQRT5 * r + (5.0 / 3.0) * r * r) * e
    k = kf + noise * np.eye(len(y))
    try:
        kinv = np.linalg.inv(k)
    except np.linalg.LinAlgError:
        return None
    alpha = kinv @ y
    w = np.outer(alpha, alpha) - kinv
    a = w * (signal * (5.0 / 3.0) * (1.0 + _SQRT5 * r) * e)
    xs = x / lengths
    row = a.sum(1)
    g_len = 0.5 * (2.0 * (row @ (xs * xs)) - 2.0 * np.einsum("id,ij,jd->d", xs, a, xs))
    g_len -= (theta[:-2] - math.log(0.5)) / 4.0
    g_signal = 0.5 * float((w * kf).sum())
    g_noise = 0.5 * noise * float(np.trace(w))
    return np.concatenate([g_len, [g_signal, g_noise]])
