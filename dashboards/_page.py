"""The dashboard page: figures and table rows as one JSON payload, drawn by a small script.

The same page serves ``/`` (plotly.js from the server, polling for new data while a search
runs) and ``xe2tune report`` (plotly.js and the payload inlined, no polling: one offline file).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from xe2tune.dashboards._convergence import _build_convergence_figure
from xe2tune.dashboards._importance import _build_importance_figure
from xe2tune.dashboards._page_assets import PAGE_CSS, PAGE_SCRIPT
from xe2tune.dashboards._plotly_imports import plotly_js, to_json
from xe2tune.dashboards._roofline import _build_roofline_figure

if TYPE_CHECKING:
    from xe2tune.dashboards._best_table import BestRow
    from xe2tune.dashboards._collect import DashboardInfo
    from xe2tune.dashboards._importance import ImportanceInfo


def _figure(figure: Any) -> dict[str, Any]:
    return figure.to_plotly_json()


def _table_row(row: BestRow) -> dict[str, Any]:
    """A best row as the script's flat record: each baseline as two sortable cells."""
    flat = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)
            if f.name != "baselines"}
    for cell in row.baselines:
        flat[f"baseline_ms:{cell.label}"] = cell.time_ms
        flat[f"baseline_speedup:{cell.label}"] = cell.speedup
    return flat


def _importance_view(info: ImportanceInfo) -> dict[str, Any]:
    figure = _figure(_build_importance_figure(info)) if info.note is None else None
    return {"study_id": info.study_id, "figure": figure, "note": info.note}


def importance_json(info: ImportanceInfo) -> str:
    """One study's importance view as JSON: a figure, or the note saying why there is none."""
    return to_json(_importance_view(info))


def dashboard_payload_json(info: DashboardInfo,
                           importances: Mapping[int, ImportanceInfo] | None = None) -> str:
    """Everything the page script draws, as JSON; studies without importances load them lazily."""
    importances = importances or {}
    return to_json({
        "version": info.version,
        "n_points": info.n_points,
        "rooflines": [{"device": r.device, "n_points": r.n_points,
                       "figure": _figure(_build_roofline_figure(r))} for r in info.rooflines],
        "table": {
            "rows": [_table_row(row) for row in info.table.rows],
            "filters": {"device": info.table.devices, "dtype": info.table.dtypes,
                        "head_dim": info.table.head_dims, "mode": info.table.modes},
            "baselines": info.table.baseline_labels,
        },
        "studies": [
            {"id": c.study_id, "title": c.title,
             "convergence": _figure(_build_convergence_figure(c)),
             "importance": (_importance_view(importances[c.study_id])
                            if c.study_id in importances else None)}
            for c in info.convergence
        ],
    })


def _script_safe(text: str) -> str:
    # Inside <script>, "</" could close the element early; "<\/" means the same to JSON and JS.
    return text.replace("</", "<\\/")


def render_page(payload_json: str, *, plotly_src: str | None, poll_s: float | None) -> str:
    """The HTML page around a :func:`dashboard_payload` serialised as JSON.

    ``plotly_src=None`` inlines plotly.js; ``poll_s=None`` never polls (a static report).
    """
    if plotly_src is None:
        plotly_tag = f"<script>{_script_safe(plotly_js())}</script>"
    else:
        plotly_tag = f'<script src="{plotly_src}"></script>'
    settings = {"pollMs": None if poll_s is None else int(poll_s * 1000),
                "live": poll_s is not None,
                "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>xe2tune dashboard</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<link rel=\"icon\" href=\"data:,\">"
        f"<style>{PAGE_CSS}</style>{plotly_tag}</head><body>"
        "<header><h1>xe2tune</h1><span id=\"status\"></span></header>"
        "<section><h2>Roofline</h2><p id=\"empty\" class=\"note\" hidden>No measurements yet: "
        "run <code>xe2tune search</code>.</p><div id=\"rooflines\"></div></section>"
        "<section><h2>Best configs</h2><div id=\"filters\"></div>"
        "<div class=\"scroll\"><table id=\"best\"><thead></thead><tbody></tbody></table></div>"
        "</section>"
        "<section><h2>Studies</h2><select id=\"study\"></select>"
        "<div class=\"pair\"><div id=\"convergence\"></div><div id=\"importance\"></div></div>"
        "</section>"
        f"<script type=\"application/json\" id=\"xe2t-data\">"
        f"{_script_safe(payload_json)}</script>"
        f"<script type=\"application/json\" id=\"xe2t-settings\">{json.dumps(settings)}</script>"
        f"<script>{PAGE_SCRIPT}</script></body></html>\n"
    )
