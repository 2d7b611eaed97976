"""The roofline chart of one device: measured configs, downsampled, against the device's roofs.

x = arithmetic intensity (FLOP/byte), y = achieved FLOP/s, both log scale. The bandwidth roof
is y = AI x peak bandwidth, each compute roof is y = peak FLOP/s of a dtype; they meet at the
ridge point AI = peak / bandwidth. A device of a lab database has 10^5+ points: the chart draws
every best, every seeded baseline and the Pareto front, and a grid sample of the rest
(``_downsample``), and says how many points stand for how many measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xe2tune.dashboards._downsample import Kept, downsample
from xe2tune.dashboards._labels import config_label, problem_label
from xe2tune.dashboards._plotly_imports import graph_objects
from xe2tune.dashboards._units import decade_ticks, engineering

if TYPE_CHECKING:
    from xe2tune.db import BestResult, DeviceRecord, ResultStore, RooflinePoints, TrialDetail

MAX_POINTS = 4000  # drawn per device; a log-log chart of 640 x 480 px shows no more
WEBGL_ABOVE = 300  # points per trace: past a few hundred SVG markers cost more to draw
DTYPE_COLOURS = {"fp16": "#1f77b4", "bf16": "#2ca02c", "fp32": "#9467bd"}


@dataclass(frozen=True)
class Roof:
    """One roof polyline: bandwidth slope up to the ridge, then flat at a compute peak."""

    label: str  # e.g. "fp16/bf16 117 TFLOP/s"
    peak_flops: float
    ridge_ai: float
    ai: tuple[float, float, float]
    flops: tuple[float, float, float]


@dataclass(frozen=True)
class PointSeries:
    """Points drawn as one trace: ``kind`` is measured, baseline, pareto or best."""

    label: str
    kind: str
    ai: tuple[float, ...]
    flops: tuple[float, ...]
    hover: tuple[str, ...]
    trial_ids: tuple[int, ...]


@dataclass(frozen=True)
class RooflineInfo:
    """Everything the roofline chart of one device draws."""

    device: str
    device_id: int
    peak_bandwidth: float | None
    peak_source: str | None
    roofs: tuple[Roof, ...]
    series: tuple[PointSeries, ...]
    n_points: int  # drawn
    n_measurements: int  # OK trials with roofline figures, which the drawn points stand for
    n_best: int
    n_baseline: int
    n_front: int  # points on the Pareto front (some of them bests or baselines)

    @property
    def caption(self) -> str:
        """e.g. ``4,000 points stand for 333,334 measurements: every best (2,000), ...``."""
        if self.n_points == self.n_measurements:
            return f"{self.n_measurements:,} measured configs, all drawn"
        return (f"{self.n_points:,} points stand for {self.n_measurements:,} measurements: "
                f"every best ({self.n_best:,}), baseline ({self.n_baseline:,}) and point of "
                f"the Pareto front ({self.n_front:,}), and a grid sample of the rest")


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
    return tuple(
        Roof(label=f"{'/'.join(dtypes)} {engineering(peak, 'FLOP/s')}", peak_flops=peak,
             ridge_ai=peak / bandwidth, ai=(lo, peak / bandwidth, hi),
             flops=(lo * bandwidth, peak, peak))
        for peak, dtypes in sorted(by_peak.items(), reverse=True))


def _peaks(store: ResultStore, device: DeviceRecord, points: RooflinePoints
           ) -> tuple[dict[str, float], float | None, str | None]:
    """Measured ceilings first (they override the catalog), then the device's stored peaks,
    then the peaks recorded with the measurements."""
    ceilings = store.ceilings(device.id) if device.id is not None else None
    if ceilings is not None and ceilings.flops:
        return dict(ceilings.flops), ceilings.bandwidth, "measured"
    if device.peak_flops and device.peak_bandwidth:
        return dict(device.peak_flops), device.peak_bandwidth, device.peak_source
    recorded: dict[str, float] = {}
    for dtype in sorted(set(points.dtype.tolist())):
        peaks = points.peak_flops[(points.dtype == dtype) & ~np.isnan(points.peak_flops)]
        if len(peaks):
            recorded[str(dtype)] = float(peaks.max())
    bandwidths = points.peak_bandwidth[~np.isnan(points.peak_bandwidth)]
    bandwidth = float(bandwidths.max()) if len(bandwidths) else None
    return recorded, bandwidth, "recorded with the measurements"


def _hover(detail: TrialDetail) -> str:
    numbers = []
    if detail.median_s is not None:
        numbers.append(f"{detail.median_s * 1e3:.4g} ms")
    if detail.achieved_flops is not None:
        numbers.append(engineering(detail.achieved_flops, "FLOP/s"))
    if detail.roofline_fraction is not None:
        numbers.append(f"{detail.roofline_fraction:.1%} of roofline")
    seeded = f" · baseline {detail.baseline}" if detail.baseline else ""
    return (f"{problem_label(detail.problem)}<br>{config_label(detail.config, with_family=True)}"
            f"<br>{', '.join(numbers)}"
            f"<br>trial {detail.trial_id}, study {detail.study_id}{seeded}")


def _series(label: str, kind: str, indexes: np.ndarray, points: RooflinePoints,
            details: dict[int, TrialDetail]) -> PointSeries:
    ids = points.trial_id[indexes].tolist()
    return PointSeries(label=label, kind=kind, ai=tuple(points.ai[indexes].tolist()),
                       flops=tuple(points.flops[indexes].tolist()),
                       hover=tuple(_hover(details[i]) for i in ids),
                       trial_ids=tuple(ids))


def _all_series(points: RooflinePoints, kept: Kept,
                details: dict[int, TrialDetail]) -> tuple[PointSeries, ...]:
    out = []
    for dtype in sorted(set(points.dtype[kept.sampled].tolist())):
        chosen = kept.sampled[points.dtype[kept.sampled] == dtype]
        out.append(_series(f"measured {dtype}", "measured", chosen, points, details))
    out.append(_series("seeded baselines", "baseline", kept.baseline, points, details))
    out.append(_series("Pareto front", "pareto", kept.pareto, points, details))
    out.append(_series("best per problem", "best", kept.best, points, details))
    return tuple(s for s in out if s.trial_ids)


def get_roofline_info(store: ResultStore, device: DeviceRecord, best: Sequence[BestResult],
                       max_points: int = MAX_POINTS) -> RooflineInfo:
    """The roofline of ``device``: its OK trials with roofline figures, downsampled.

    Raises:
        StoreError: the database could not be read.
    """
    assert device.id is not None, "devices read from a store have ids"
    points = store.roofline_points(device.id)
    best_ids = np.asarray([b.trial_id for b in best if b.device_id == device.id], dtype=np.int64)
    kept = downsample(points.ai, points.flops, np.isin(points.trial_id, best_ids),
                      points.baseline, max_points)
    drawn = np.concatenate([kept.best, kept.baseline, kept.pareto, kept.sampled])
    details = store.trial_details(points.trial_id[drawn].tolist())
    peak_flops, bandwidth, source = _peaks(store, device, points)
    ai_range = ((float(points.ai.min()), float(points.ai.max())) if len(points.ai)
                else (1.0, 1.0))
    if bandwidth is not None and math.isnan(bandwidth):
        bandwidth = None
    return RooflineInfo(
        device=device.name, device_id=device.id, peak_bandwidth=bandwidth, peak_source=source,
        roofs=_roofs(peak_flops, bandwidth, ai_range),
        series=_all_series(points, kept, details), n_points=kept.n_points,
        n_measurements=len(points.ai), n_best=len(kept.best), n_baseline=len(kept.baseline),
        n_front=kept.front_size)


# Circles told apart by size, fill and ring: in WebGL traces every other symbol costs each chart
# ~0.45 s in headless Chromium (its distance field is rasterised per chart), as much as the
# rest of the chart.
SERIES_STYLE: dict[str, dict[str, Any]] = {
    "baseline": {"symbol": "circle", "size": 8, "color": "#ff7f0e",
                 "line": {"color": "#7a3d00", "width": 1}},
    "pareto": {"symbol": "circle", "size": 6, "color": "#222"},
    "best": {"symbol": "circle", "size": 13, "color": "rgba(0,0,0,0)",
             "line": {"color": "#d62728", "width": 2}},
}


def _marker(series: PointSeries) -> dict[str, Any]:
    if series.kind == "measured":
        return {"size": 5, "opacity": 0.55,
                "color": DTYPE_COLOURS.get(series.label.split()[-1], "#7f7f7f")}
    return SERIES_STYLE[series.kind]


def _roof_annotations(info: RooflineInfo) -> list[dict[str, Any]]:
    """Each compute roof named with its peak at its right end, the bandwidth roof with its
    GB/s along the slope, and each ridge point with its intensity."""
    notes = []
    for roof in info.roofs:
        notes.append({"x": math.log10(roof.ai[2]), "y": math.log10(roof.peak_flops),
                      "text": roof.label, "showarrow": False, "xanchor": "right",
                      "yanchor": "bottom", "font": {"size": 11}})
        notes.append({"x": math.log10(roof.ridge_ai), "y": math.log10(roof.peak_flops),
                      "text": f"ridge {roof.ridge_ai:.3g} FLOP/B", "showarrow": True,
                      "arrowhead": 0, "ax": 0, "ay": 26, "font": {"size": 10}})
    if info.roofs and info.peak_bandwidth:
        lowest = min(info.roofs, key=lambda r: r.peak_flops)
        x = math.sqrt(lowest.ai[0] * lowest.ridge_ai)  # halfway up the slope, in log space
        notes.append({"x": math.log10(x), "y": math.log10(x * info.peak_bandwidth),
                      "text": f"bandwidth {engineering(info.peak_bandwidth, 'B/s')}",
                      "showarrow": False, "textangle": -28, "yanchor": "bottom",
                      "font": {"size": 11}})
    return notes


def build_roofline_figure(info: RooflineInfo) -> Any:
    """A plotly figure of the info: labelled roofs, then the drawn points by kind."""
    go = graph_objects()
    fig = go.Figure()
    for roof in info.roofs:
        fig.add_trace(go.Scatter(x=roof.ai, y=roof.flops, mode="lines", name=roof.label,
                                 line={"color": "#444", "width": 2}, hoverinfo="name",
                                 meta="roof", showlegend=False))
    for series in info.series:
        scatter = go.Scattergl if len(series.trial_ids) > WEBGL_ABOVE else go.Scatter
        fig.add_trace(scatter(
            x=np.asarray(series.ai, dtype=float), y=np.asarray(series.flops, dtype=float),
            text=np.asarray(series.hover, dtype=object),
            customdata=np.asarray(series.trial_ids, dtype=np.int64), mode="markers",
            name=f"{series.label} ({len(series.trial_ids):,})", hoverinfo="text",
            meta=series.kind, marker=_marker(series)))
    all_flops = [f for s in info.series for f in s.flops] + [r.peak_flops for r in info.roofs]
    all_ai = [a for s in info.series for a in s.ai] + [a for r in info.roofs for a in r.ai]
    xaxis: dict[str, Any] = {"type": "log", "title": "arithmetic intensity (FLOP/byte)",
                             "ticks": "outside", "minor": {"showgrid": False}}
    yaxis: dict[str, Any] = {"type": "log", "title": "achieved FLOP/s", "ticks": "outside",
                             "minor": {"showgrid": False}}
    if all_flops:
        lo_y, hi_y = min(all_flops) / 2, max(all_flops) * 2
        yaxis.update(decade_ticks(lo_y, hi_y, "FLOP/s"),
                     range=[math.log10(lo_y), math.log10(hi_y)])
        lo_x, hi_x = min(all_ai), max(all_ai)
        xaxis.update(decade_ticks(lo_x, hi_x, None),
                     range=[math.log10(lo_x), math.log10(hi_x)])
    # Short: the toolbar sits at the top right. The page prints ``caption`` under the chart.
    peaks = f"peaks: {info.peak_source}" if info.peak_source else "no peaks known: no roofs"
    fig.update_layout(
        title={"text": f"{info.device}<br><sup>{peaks}</sup>",
               "x": 0.01, "xanchor": "left", "y": 0.97, "yanchor": "top", "font": {"size": 15}},
        xaxis=xaxis, yaxis=yaxis, annotations=_roof_annotations(info),
        legend={"orientation": "h", "y": -0.16, "font": {"size": 11}},
        margin={"t": 86, "l": 90, "r": 20, "b": 40}, height=520,
        hoverlabel={"align": "left"},
    )
    return fig
