"""The table of best configs per tuned problem, served a page at a time (filtered, sorted).

Each row also holds the problem's seeded baselines (e.g. "seed 000 SageV1"): their time and the
best's speedup over each, and the speedup over the fastest of them up front, so a tuned result
is always read against them. A lab has thousands of tuned problems: the page asks for one page
of rows with its filters and sort order (:func:`best_page`) instead of receiving them all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

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
    head_dim_v: int  # Dv: head_dim except in latent attention
    dtype: str
    kv_dtype: str  # the element type K/V are stored in: dtype, or an FP8 format
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
    # Over the fastest seeded baseline that ran OK (the strongest published config), its label.
    baseline_speedup: float | None
    fastest_baseline: str | None
    # Alternating rounds in which best, default and baselines were re-timed side by side (the
    # time and speedups come from them); None when the study was never confirmed.
    confirmed_rounds: int | None
    trial_id: int
    study_id: int
    baseline: str | None  # the label when the best is itself a seeded baseline
    baselines: tuple[BaselineCell, ...]  # by label


@dataclass(frozen=True)
class BestTableInfo:
    """The rows, the values each filter offers and every baseline label (one column pair each)."""

    rows: tuple[BestRow, ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    head_dims: tuple[int, ...]
    head_dims_v: tuple[int, ...]
    kv_dtypes: tuple[str, ...]
    modes: tuple[str, ...]
    baseline_labels: tuple[str, ...]


def _baseline_cell(baseline: BaselineResult) -> BaselineCell:
    return BaselineCell(
        label=baseline.label, family=baseline.family, config=config_label(baseline.config),
        status=baseline.status.value,
        time_ms=None if baseline.median_s is None else baseline.median_s * 1e3,
        speedup=baseline.speedup,
    )


def _fastest_baseline(cells: tuple[BaselineCell, ...]) -> BaselineCell | None:
    timed = [c for c in cells if c.time_ms is not None and c.speedup is not None]
    return min(timed, key=lambda c: c.time_ms) if timed else None


def _row(b: BestResult) -> BestRow:
    cells = tuple(_baseline_cell(baseline) for baseline in b.baselines)
    fastest = _fastest_baseline(cells)
    return BestRow(
        device=b.device, family=b.family, mode=b.problem.mode, head_dim=b.problem.head_dim,
        head_dim_v=b.problem.head_dim_v, dtype=b.problem.dtype,
        kv_dtype=b.problem.kv_element_dtype, q_len=b.problem.q_len, kv_len=b.problem.kv_len,
        heads_q=b.problem.heads_q, heads_kv=b.problem.heads_kv, batch=b.problem.batch,
        causal=b.problem.causal, config=config_label(b.config), time_ms=b.median_s * 1e3,
        tflops=b.tflops,
        roofline_pct=None if b.roofline_fraction is None else b.roofline_fraction * 100,
        speedup=b.speedup,
        baseline_speedup=None if fastest is None else fastest.speedup,
        fastest_baseline=None if fastest is None else fastest.label,
        confirmed_rounds=b.confirmed_rounds, trial_id=b.trial_id, study_id=b.study_id,
        baseline=b.baseline, baselines=cells,
    )


def get_best_table_info(best: Sequence[BestResult]) -> BestTableInfo:
    """Rows in ``best_per_problem`` order, and the distinct filter values."""
    rows = tuple(_row(b) for b in best)
    return BestTableInfo(
        rows=rows,
        devices=tuple(sorted({r.device for r in rows})),
        dtypes=tuple(sorted({r.dtype for r in rows})),
        head_dims=tuple(sorted({r.head_dim for r in rows})),
        head_dims_v=tuple(sorted({r.head_dim_v for r in rows})),
        kv_dtypes=tuple(sorted({r.kv_dtype for r in rows})),
        modes=tuple(sorted({r.mode for r in rows})),
        baseline_labels=tuple(sorted({c.label for r in rows for c in r.baselines})),
    )


SortKey = Literal["time_ms", "tflops", "roofline_pct", "speedup", "baseline_speedup", "device",
                  "family", "mode", "head_dim", "head_dim_v", "dtype", "kv_dtype", "q_len",
                  "kv_len", "heads_q", "batch", "causal", "confirmed_rounds", "config"]
SORT_KEYS: tuple[str, ...] = get_args(SortKey)
MAX_PAGE_ROWS = 500


@dataclass(frozen=True)
class BestPageQuery:
    """One page of the table: equality filters (None = any), a sort key and a window."""

    device: str | None = None
    dtype: str | None = None
    head_dim: int | None = None
    head_dim_v: int | None = None
    kv_dtype: str | None = None
    mode: str | None = None
    sort: str | None = None  # one of SORT_KEYS; None keeps the problem order
    descending: bool = False
    offset: int = 0
    limit: int = 50

    def __post_init__(self) -> None:
        if self.sort is not None and self.sort not in SORT_KEYS:
            raise ValueError(f"sort {self.sort!r} is not a column; accepted: "
                             + ", ".join(SORT_KEYS))
        if not (1 <= self.limit <= MAX_PAGE_ROWS) or self.offset < 0:
            raise ValueError(f"limit must be 1..{MAX_PAGE_ROWS} and offset >= 0, got "
                             f"limit={self.limit}, offset={self.offset}")


@dataclass(frozen=True)
class BestPage:
    """The rows of one page and how many rows pass the filters."""

    total: int
    rows: tuple[BestRow, ...]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def best_page(rows: Sequence[BestRow], query: BestPageQuery) -> BestPage:
    """Filter, sort (missing values last in either direction, then problem order), slice."""
    wanted = {k: v for k, v in (("device", query.device), ("dtype", query.dtype),
                                ("head_dim", query.head_dim), ("head_dim_v", query.head_dim_v),
                                ("kv_dtype", query.kv_dtype), ("mode", query.mode))
              if v is not None}
    kept = [r for r in rows if all(getattr(r, k) == v for k, v in wanted.items())]
    if query.sort is not None:
        key = query.sort
        present = [r for r in kept if not _missing(getattr(r, key))]
        present.sort(key=lambda r: getattr(r, key), reverse=query.descending)
        kept = present + [r for r in kept if _missing(getattr(r, key))]
    return BestPage(total=len(kept),
                    rows=tuple(kept[query.offset:query.offset + query.limit]))
