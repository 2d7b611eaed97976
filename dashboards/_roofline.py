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


def _hover(row: Any) -> str:
    return (f"{config_label(row.config)}<br>{row.median_s * 1e3:.4g} ms, "
            f"{row.achieved_flops / 1e12:.4g} TFLOP/s, "
            f"{(row.roofline_fraction or 0) * 100:.1f}% of roofline<br>trial {row.trial_id}")


def _series(label: str, rows: Sequence[Any]) -> PointSeries:
    return PointSeries(label=label, ai=tuple(float(r.arithmetic_intensity) for r in rows),
                       flops=tuple(float(r.achieved_flops) for r in rows),
                       hover=tuple(_hover(r) for r in rows),
                       trial_ids=tuple(int(r.trial_id) for r in rows))


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
    for key, group in plotted.groupby(list(_PROBLEM_COLUMNS), sort=True):
        problem = ProblemSpec(**dict(zip(_PROBLEM_COLUMNS, key, strict=True)))
        series.append(_series(problem_label(problem), list(group.itertuples())))
    best_ids = {b.trial_id for b in best if b.device_id == device.id}
    best_rows = list(plotted[plotted["trial_id"].isin(best_ids)].itertuples())
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
        best=_series("best per problem", best_rows), n_points=len(plotted),
        n_unplotted=len(ok) - len(plotted),
    )


def _build_roofline_figure(info: RooflineInfo) -> Any:
    """A plotly figure of the info: roofs as lines, points per problem, best points ringed."""
    go = graph_objects()
    scatter = go.Scattergl if info.n_points > WEBGL_ABOVE else go.Scatter
    fig = go.Figure()
    for roof in info.roofs:
        fig.add_trace(go.Scatter(x=roof.ai, y=roof.flops, mode="lines", name=roof.label,
                                 line={"color": "#444", "width": 2}, hoverinfo="name",
                                 meta="roof"))
    for series in info.series:
        fig.add_trace(scatter(x=series.ai, y=series.flops, mode="markers", name=series.label,
                              text=series.hover, hoverinfo="text", meta="measured",
                              customdata=series.trial_ids, marker={"size": 7, "opacity": 0.75}))
    fig.add_trace(scatter(x=info.best.ai, y=info.best.flops, mode="markers",
                          name=info.best.label, text=info.best.hover, hoverinfo="text",
                          meta="best", customdata=info.best.trial_ids,
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
