"""The roofline chart of one device: every measured config against the device's roofs.

x = arithmetic intensity (FLOP/byte), y = achieved FLOP/s, both log scale. The bandwidth roof
is y = AI x peak bandwidth, each compute roof is y = peak FLOP/s of a dtype; they meet at the
ridge point AI = peak / bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xe2tune.dashboards._labels import config_label, problem_label
from xe2tune.dashboards._plotly_imports import graph_objects
from xe2tune.kernels import ProblemSpec

if TYPE_CHECKING:
    import pandas as pd

    from xe2tune.db import BestResult, DeviceRecord

WEBGL_ABOVE = 5000  # points; SVG markers get slow past a few thousand
_PROBLEM_COLUMNS = ("mode", "head_dim", "dtype", "q_len", "kv_len", "heads_q", "heads_kv",
                    "batch", "causal")


@dataclass(frozen=True)
class Roof:
    """One roof polyline: bandwidth slope up to the ridge, then flat at a compute peak."""

    label: str
    peak_flops: float
    ridge_ai: float
    ai: tuple[float, float, float]
    flops: tuple[float, float, float]


@dataclass(frozen=True)
class PointSeries:
    """The measured points of one problem (one colour), or the best points of all problems."""

    label: str
    ai: tuple[float, ...]
    flops: tuple[float, ...]
    hover: tuple[str, ...]
    trial_ids: tuple[int, ...]


@dataclass(frozen=True)
class RooflineInfo:
    """Everything the roofline chart of one device draws."""

    device: str
    peak_bandwidth: float | None
    peak_source: str | None
    roofs: tuple[Roof, ...]
    series: tuple[PointSeries, ...]
    best: PointSeries
    n_points: int
    n_unplotted: int  # OK trials without roofline figures (the device had no peaks)


def _roofs(peak_flops: dict[str, float], bandwidth: float | None,
           ai_range: tuple[float, float]) -> tuple[Roof, ...]:
    if not bandwidth or bandwidth <= 0 or not any(p and p > 0 for p in peak_flops.values()):
        return ()
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in sorted(peak_flops.items()):
        if peak and peak > 0:
            by_peak.setdefault(float(peak), []).append(dtype)
    ridges = [peak / bandwidth for peak in by_peak]
    lo = min(ai_range[0], *ridges) / 4
    hi = max(ai_range[1], *ridges) * 4
    roofs = []
    for peak, dtypes in sorted(by_peak.items(), reverse=True):
        ridge = peak / bandwidth
        roofs.append(Roof(label="/".join(dtypes) + f" peak {peak / 1e12:.3g} TFLOP/s",
                          peak_flops=peak, ridge_ai=ridge, ai=(lo, ridge, hi),
                          flops=(lo * bandwidth, peak, peak)))
    return tuple(roofs)


def _series(label: str, rows: pd.DataFrame, labels: dict[str, str]) -> PointSeries:
    # Column lists, not itertuples: iterating a frame with datetime columns is slow at 100k rows.
    hover = []
    for config, config_hash, median, flops, fraction, trial_id, baseline in zip(
            rows["config"].tolist(), rows["config_hash"].tolist(), rows["median_s"].tolist(),
            rows["achieved_flops"].tolist(), rows["roofline_fraction"].tolist(),
            rows["trial_id"].tolist(), rows["baseline"].tolist(), strict=True):
        if config_hash not in labels:
            labels[config_hash] = config_label(config, with_family=True)
        share = "" if fraction is None or fraction != fraction else f", {fraction:.1%} of roofline"
        seeded = f" · baseline {baseline}" if isinstance(baseline, str) else ""
        hover.append(f"{labels[config_hash]}<br>{median * 1e3:.4g} ms, {flops / 1e12:.4g} "
                     f"TFLOP/s{share}<br>trial {trial_id}{seeded}")
    return PointSeries(label=label,
                       ai=tuple(float(v) for v in rows["arithmetic_intensity"].tolist()),
                       flops=tuple(float(v) for v in rows["achieved_flops"].tolist()),
                       hover=tuple(hover), trial_ids=tuple(int(v) for v in rows["trial_id"]))


def _get_roofline_info(frame: pd.DataFrame, device: DeviceRecord,
                       best: Sequence[BestResult]) -> RooflineInfo:
    """The roofline of ``device`` from a ``results_frame`` and its best-per-problem list.

    Only OK trials with roofline figures are points; the device's stored peaks draw the roofs,
    falling back to the peaks recorded with the measurements when the device row has none.
    """
    ok = frame[(frame["device_id"] == device.id) & (frame["status"] == "ok")]
    plotted = ok[ok["arithmetic_intensity"].notna() & ok["achieved_flops"].notna()
                 & (ok["arithmetic_intensity"] > 0) & (ok["achieved_flops"] > 0)]
    series = []
    labels: dict[str, str] = {}
    for key, group in plotted.groupby(list(_PROBLEM_COLUMNS), sort=True):
        problem = ProblemSpec(**dict(zip(_PROBLEM_COLUMNS, key, strict=True)))
        series.append(_series(problem_label(problem), group, labels))
    best_ids = {b.trial_id for b in best if b.device_id == device.id}
    best_rows = plotted[plotted["trial_id"].isin(best_ids)]
    peak_flops = dict(device.peak_flops)
    bandwidth = device.peak_bandwidth
    source = device.peak_source
    if not peak_flops or not bandwidth:
        peak_flops = {str(d): float(p) for d, p in
                      plotted.groupby("dtype")["peak_flops"].max().dropna().items()}
        bandwidth = float(plotted["peak_bandwidth"].max()) if len(plotted) else None
        source = "recorded with the measurements"
    ai_values = plotted["arithmetic_intensity"]
    ai_range = (float(ai_values.min()), float(ai_values.max())) if len(plotted) else (1.0, 1.0)
    if bandwidth is not None and math.isnan(bandwidth):
        bandwidth = None
    return RooflineInfo(
        device=device.name, peak_bandwidth=bandwidth, peak_source=source,
        roofs=_roofs(peak_flops, bandwidth, ai_range), series=tuple(series),
        best=_series("best per problem", best_rows, labels), n_points=len(plotted),
        n_unplotted=len(ok) - len(plotted),
    )


def _arrays(series: PointSeries) -> dict[str, np.ndarray]:
    return {"x": np.asarray(series.ai, dtype=float), "y": np.asarray(series.flops, dtype=float),
            "text": np.asarray(series.hover, dtype=object),
            "customdata": np.asarray(series.trial_ids, dtype=np.int64)}


def _build_roofline_figure(info: RooflineInfo) -> Any:
    """A plotly figure of the info: roofs as lines, points per problem, best points ringed."""
    go = graph_objects()
    scatter = go.Scattergl if info.n_points > WEBGL_ABOVE else go.Scatter
    fig = go.Figure()
    for roof in info.roofs:
        fig.add_trace(go.Scatter(x=roof.ai, y=roof.flops, mode="lines", name=roof.label,
                                 line={"color": "#444", "width": 2}, hoverinfo="name",
                                 meta="roof"))
    # numpy arrays: plotly validates them as a block instead of element by element.
    for series in info.series:
        fig.add_trace(scatter(**_arrays(series), mode="markers", name=series.label,
                              hoverinfo="text", meta="measured",
                              marker={"size": 7, "opacity": 0.75}))
    fig.add_trace(scatter(**_arrays(info.best), mode="markers", name=info.best.label,
                          hoverinfo="text", meta="best",
                          marker={"size": 15, "symbol": "star", "color": "rgba(0,0,0,0)",
                                  "line": {"color": "#d62728", "width": 2}}))
    subtitle = f"{info.n_points} measured configs"
    if info.peak_source:
        subtitle += f"; peaks: {info.peak_source}"
    if info.n_unplotted:
        subtitle += f"; {info.n_unplotted} OK trials without roofline figures (no device peaks)"
    fig.update_layout(
        title={"text": f"Roofline: {info.device}<br><sup>{subtitle}</sup>"},
        xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
        yaxis={"type": "log", "title": "achieved FLOP/s"},
        legend={"font": {"size": 10}}, margin={"t": 70}, height=520,
    )
    return fig
