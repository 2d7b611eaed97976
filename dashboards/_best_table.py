"""The table of best configs per tuned problem (drawn as a sortable HTML table, not a figure).

Each row also holds the problem's seeded baselines (e.g. "seed 000 SageV1"): their time and the
best's speedup over each, so a tuned result is always read against them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xe2tune.dashboards._labels import config_label

if TYPE_CHECKING:
    from xe2tune.db import BaselineResult, BestResult


@dataclass(frozen=True)
class BaselineCell:
    """One seeded baseline's result beside a best; time and speedup None when it failed."""

    label: str
    family: str
    config: str
    status: str
    time_ms: float | None
    speedup: float | None  # the baseline's time over the best's


@dataclass(frozen=True)
class BestRow:
    """One tuned problem's best config, with the numbers an engineer compares."""

    device: str
    family: str
    mode: str
    head_dim: int
    dtype: str
    q_len: int
    kv_len: int
    heads_q: int
    heads_kv: int
    batch: int
    causal: bool
    config: str
    time_ms: float
    tflops: float | None
    roofline_pct: float | None
    speedup: float | None  # over the default config of the same study; None if not measured
    # Alternating rounds in which best, default and baselines were re-timed side by side (the
    # time and speedups come from them); None when the study was never confirmed.
    confirmed_rounds: int | None
    trial_id: int
    baseline: str | None  # the label when the best is itself a seeded baseline
    baselines: tuple[BaselineCell, ...]  # by label


@dataclass(frozen=True)
class BestTableInfo:
    """The rows, the values each filter offers and every baseline label (one column pair each)."""

    rows: tuple[BestRow, ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]
    modes: tuple[str, ...]
    baseline_labels: tuple[str, ...]


def _baseline_cell(baseline: BaselineResult) -> BaselineCell:
    return BaselineCell(
        label=baseline.label, family=baseline.family, config=config_label(baseline.config),
        status=baseline.status.value,
        time_ms=None if baseline.median_s is None else baseline.median_s * 1e3,
        speedup=baseline.speedup,
    )


def _get_best_table_info(best: Sequence[BestResult]) -> BestTableInfo:
    """Rows in ``best_per_problem`` order, and the distinct filter values."""
    rows = tuple(
        BestRow(
            device=b.device, family=b.family, mode=b.problem.mode, head_dim=b.problem.head_dim,
            dtype=b.problem.dtype, q_len=b.problem.q_len, kv_len=b.problem.kv_len,
            heads_q=b.problem.heads_q, heads_kv=b.problem.heads_kv, batch=b.problem.batch,
            causal=b.problem.causal, config=config_label(b.config), time_ms=b.median_s * 1e3,
            tflops=b.tflops,
            roofline_pct=None if b.roofline_fraction is None else b.roofline_fraction * 100,
            speedup=b.speedup, confirmed_rounds=b.confirmed_rounds, trial_id=b.trial_id,
            baseline=b.baseline,
            baselines=tuple(_baseline_cell(baseline) for baseline in b.baselines),
        )
        for b in best
    )
    return BestTableInfo(
        rows=rows,
        devices=tuple(sorted({r.device for r in rows})),
        dtypes=tuple(sorted({r.dtype for r in rows})),
        head_dims=tuple(sorted({r.head_dim for r in rows})),
        modes=tuple(sorted({r.mode for r in rows})),
        baseline_labels=tuple(sorted({c.label for r in rows for c in r.baselines})),
    )
