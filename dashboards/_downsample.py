"""Roofline points of a device thinned to what a chart can show, keeping every point that matters.

Kept always: every problem's best, every seeded baseline and the Pareto front of (arithmetic
intensity, achieved FLOP/s), both maximised: the points no other point beats on both, which
trace the upper edge of the cloud under the roofs. The rest is thinned on a log-log grid, one
point (the fastest) per occupied cell, so the cloud keeps its shape and its outliers; when more
cells are occupied than the budget allows, a fixed-seed sample of them is taken. The sample
gets at least half the budget, however many points must be kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRID = 160  # cells per axis: about one cell per 4 px of a 640 px chart
SEED = 16


@dataclass(frozen=True)
class Kept:
    """Indexes into the point arrays of what is drawn, and why (each index in one group)."""

    front_size: int  # points on the Pareto front, bests and baselines among them
    best: np.ndarray
    baseline: np.ndarray
    pareto: np.ndarray
    sampled: np.ndarray

    @property
    def n_points(self) -> int:
        return len(self.best) + len(self.baseline) + len(self.pareto) + len(self.sampled)


def pareto_front(ai: np.ndarray, flops: np.ndarray) -> np.ndarray:
    """Indexes of the points not beaten on both intensity and FLOP/s by another point."""
    order = np.lexsort((-flops, -ai))  # intensity descending, the fastest first on ties
    running = np.maximum.accumulate(flops[order])
    better = np.empty(len(order), dtype=bool)
    if len(order):
        better[0] = True
        better[1:] = flops[order][1:] > running[:-1]
    return np.sort(order[better])


def _grid_sample(ai: np.ndarray, flops: np.ndarray, candidates: np.ndarray,
                 budget: int) -> np.ndarray:
    if budget <= 0 or len(candidates) == 0:
        return np.empty(0, dtype=np.int64)
    x, y = np.log10(ai[candidates]), np.log10(flops[candidates])

    def cell(values: np.ndarray) -> np.ndarray:
        span = values.max() - values.min()
        scaled = (values - values.min()) / span if span > 0 else np.zeros_like(values)
        return np.minimum((scaled * GRID).astype(np.int64), GRID - 1)

    cells = cell(x) * GRID + cell(y)
    order = np.lexsort((-flops[candidates], cells))  # by cell, the fastest first
    first = np.ones(len(order), dtype=bool)
    first[1:] = cells[order][1:] != cells[order][:-1]
    chosen = candidates[order[first]]
    if len(chosen) > budget:
        chosen = np.random.default_rng(SEED).choice(chosen, size=budget, replace=False)
    return np.sort(chosen)


def downsample(ai: np.ndarray, flops: np.ndarray, is_best: np.ndarray, is_baseline: np.ndarray,
               budget: int) -> Kept:
    """What to draw of these points: the must-keep ones, then a sample up to ``budget`` in
    total, and never fewer than ``budget // 2`` sampled points.

    The must-keep points are drawn even when they alone exceed the budget; they grow with the
    tuned problems (a lab keeps a few baselines per problem), and the sample keeps the cloud of
    ordinary measurements visible beside them.
    """
    best = np.flatnonzero(is_best)
    baseline = np.flatnonzero(is_baseline & ~is_best)
    on_front = np.zeros(len(ai), dtype=bool)
    on_front[pareto_front(ai, flops)] = True
    pareto = np.flatnonzero(on_front & ~is_best & ~is_baseline)
    rest = np.flatnonzero(~on_front & ~is_best & ~is_baseline)
    left = max(budget - len(best) - len(baseline) - len(pareto), budget // 2)
    sampled = rest if len(rest) <= left else _grid_sample(ai, flops, rest, left)
    return Kept(front_size=int(on_front.sum()), best=best, baseline=baseline, pareto=pareto,
                sampled=sampled)
