"""Per study: the best median found so far against the trial number."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from xe2tune.dashboards._labels import study_label
from xe2tune.dashboards._plotly_imports import graph_objects
from xe2tune.dashboards._roofline import WEBGL_ABOVE

if TYPE_CHECKING:
    from xe2tune.db import StudyRecord


@dataclass(frozen=True)
class ConvergenceInfo:
    """Trial numbers with their medians (ms; None = failed) and the running best."""

    study_id: int
    title: str
    numbers: tuple[int, ...]
    values_ms: tuple[float | None, ...]
    best_so_far_ms: tuple[float | None, ...]
    default_ms: float | None
    n_failed: int


def _present(value: Any) -> bool:
    return value is not None and not pd.isna(value)


def get_convergence_info(study: StudyRecord, rows: pd.DataFrame) -> ConvergenceInfo:
    """From the study's rows of a ``results_frame``, taken in stored order (trial id).

    A trial's x is its optuna number when it has one, else its position; only OK trials have a
    value (their median), as only they can become best.
    """
    numbers: list[int] = []
    values: list[float | None] = []
    running: list[float | None] = []
    best = math.inf
    default = None
    ordered = rows.sort_values("trial_id")
    for position, (status, median, is_default, number) in enumerate(zip(
            ordered["status"].tolist(), ordered["median_s"].tolist(),
            ordered["is_default"].tolist(), ordered["number"].tolist(), strict=True)):
        ok = status == "ok" and _present(median) and median > 0
        value = float(median) * 1e3 if ok else None
        if value is not None:
            best = min(best, value)
            if is_default:
                default = value if default is None else min(default, value)
        numbers.append(int(number) if _present(number) else position)
        values.append(value)
        running.append(best if math.isfinite(best) else None)
    return ConvergenceInfo(
        study_id=study.id,
        title=study_label(study),
        numbers=tuple(numbers), values_ms=tuple(values), best_so_far_ms=tuple(running),
        default_ms=default, n_failed=sum(v is None for v in values),
    )


def build_convergence_figure(info: ConvergenceInfo) -> Any:
    """Measured medians as points, the running best as a step line, the default as a rule."""
    go = graph_objects()
    numbers = np.asarray(info.numbers, dtype=np.int64)
    values = np.asarray([np.nan if v is None else v for v in info.values_ms], dtype=float)
    running = np.asarray([np.nan if v is None else v for v in info.best_so_far_ms], dtype=float)
    measured = ~np.isnan(values)
    fig = go.Figure()
    # A campaign's study runs for thousands of trials: WebGL markers past a few thousand.
    scatter = go.Scattergl if measured.sum() > WEBGL_ABOVE else go.Scatter
    fig.add_trace(scatter(x=numbers[measured], y=values[measured], mode="markers",
                             name="trial median", marker={"size": 6}))
    fig.add_trace(go.Scatter(x=numbers, y=running, mode="lines", line={"shape": "hv"},
                             name="best so far"))
    if info.default_ms is not None:
        fig.add_hline(y=info.default_ms, line={"dash": "dot", "color": "#888"},
                      annotation_text="default config")
    failed = f"; {info.n_failed} failed" if info.n_failed else ""
    fig.update_layout(title={"text": f"{info.title}<br><sup>{len(info.numbers)} trials"
                                     f"{failed}</sup>", "x": 0.01, "xanchor": "left",
                             "font": {"size": 13}},
                      xaxis={"title": "trial number"}, yaxis={"title": "median time (ms)"},
                      height=360, margin={"t": 80}, legend={"orientation": "h", "y": -0.25})
    return fig
