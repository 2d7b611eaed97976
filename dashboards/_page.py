"""The dashboard page and the JSON of each view it draws.

The live page (``/``) embeds only the summary and fetches each view when it shows it: the
roofline of the device its buttons select, a page of the best-configs table, a study.
``xe2tune report`` embeds the same views, bounded (every device's roofline, the first
``REPORT_ROWS`` table rows, the ``REPORT_STUDIES`` studies with the most trials), and
plotly.js: one offline file whose size does not grow with the database.

The page's stylesheet and script are the package files ``page.css`` and ``page.js``. The script
draws the embedded summary's table filters, study list and device buttons, then fetches each
view (one device's roofline at a time, the one its button selects): live, from the server's
``/dashboard/*`` endpoints (the server filters, sorts and pages the table and downsamples the
rooflines); in a report, from the views embedded in the file (the table's bounded rows are
filtered and sorted in the page). It records ``performance`` marks (``xe2t-table``,
``xe2t-roofline``, ``xe2t-study``, then ``xe2t-ready`` once the frame showing them is
produced) for the benchmarks.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from importlib import resources
from typing import TYPE_CHECKING, Any

from xe2tune.dashboards._convergence import build_convergence_figure
from xe2tune.dashboards._importance import build_importance_figure
from xe2tune.dashboards._labels import study_label
from xe2tune.dashboards._plotly_imports import plotly_js, to_json
from xe2tune.dashboards._roofline import build_roofline_figure

if TYPE_CHECKING:
    from xe2tune.dashboards._best_table import BestPage, BestRow
    from xe2tune.dashboards._collect import DashboardSummary
    from xe2tune.dashboards._convergence import ConvergenceInfo
    from xe2tune.dashboards._importance import ImportanceInfo
    from xe2tune.dashboards._roofline import RooflineInfo

PAGE_CSS = resources.files(__package__).joinpath("page.css").read_text(encoding="utf-8")
PAGE_SCRIPT = resources.files(__package__).joinpath("page.js").read_text(encoding="utf-8")


def _table_row(row: BestRow) -> dict[str, Any]:
    """A best row as the script's flat record, its baselines as a list for the expanded view."""
    flat = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)
            if f.name != "baselines"}
    flat["baselines"] = [dataclasses.asdict(cell) for cell in row.baselines]
    return flat


# Studies the page's study list offers: the most recent ones. A list of thousands is no use to
# read and costs the page half a second to build; any other study opens from its table row.
STUDY_CHOICES = 200


def summary_view(summary: DashboardSummary, *, study_ids: set[int] | None = None
                 ) -> dict[str, Any]:
    """The first payload: counts, devices, the table's filters, the study list (the given
    studies, else the ``STUDY_CHOICES`` most recent ones)."""
    if study_ids is None:
        study_ids = set(sorted((s.id for s in summary.studies), reverse=True)[:STUDY_CHOICES])
    studies = [s for s in summary.studies if s.id in study_ids]
    return {
        "version": summary.version,
        "counts": {"measurements": summary.n_measurements, "ok": summary.n_ok,
                   "problems": summary.n_problems, "tuned": len(summary.table.rows),
                   "studies": len(summary.studies), "devices": len(summary.devices)},
        "devices": [{"id": d.id, "name": d.name} for d in summary.devices],
        "filters": {"device": summary.table.devices, "dtype": summary.table.dtypes,
                    "head_dim": summary.table.head_dims,
                    "head_dim_v": summary.table.head_dims_v,
                    "kv_dtype": summary.table.kv_dtypes, "mode": summary.table.modes},
        "baselines": summary.table.baseline_labels,
        "studies": [[s.id, study_label(s)] for s in studies],
    }


def roofline_view(info: RooflineInfo) -> dict[str, Any]:
    """One device's roofline: the figure and how many measurements its points stand for."""
    figure = build_roofline_figure(info).to_plotly_json()
    return {"device_id": info.device_id, "device": info.device, "n_points": info.n_points,
            "n_measurements": info.n_measurements, "caption": info.caption,
            "figure": figure, "hover_lines": _shared_hover_lines(figure["data"])}


def _shared_hover_lines(traces: list[dict[str, Any]]) -> list[str]:
    """Send each hover's first two lines (problem, config) once: the distinct lines, and per
    trace ``hover_line_ids`` (two index lists) beside ``text`` (the rest of each hover), which
    the page joins again. Every best and baseline is drawn, so the hovers are most of a
    roofline's bytes, and a lab's thousands of points share few problems and configs."""
    ids: dict[str, int] = {}
    for trace in traces:
        texts = trace.get("text")
        if trace.get("meta") == "roof" or texts is None or len(texts) == 0:
            continue
        parts = [str(text).split("<br>", 2) for text in texts]
        trace["hover_line_ids"] = [[ids.setdefault(p[line], len(ids)) for p in parts]
                                   for line in (0, 1)]
        trace["text"] = [p[2] for p in parts]
    return list(ids)


def best_page_view(page: BestPage) -> dict[str, Any]:
    """One table page."""
    return {"total": page.total, "rows": [_table_row(row) for row in page.rows]}


def study_view(info: ConvergenceInfo) -> dict[str, Any]:
    """One study's convergence chart."""
    return {"id": info.study_id, "title": info.title,
            "figure": build_convergence_figure(info).to_plotly_json()}


def importance_view(info: ImportanceInfo) -> dict[str, Any]:
    """One study's importance: a figure, or the note saying why there is none."""
    figure = build_importance_figure(info).to_plotly_json() if info.note is None else None
    return {"study_id": info.study_id, "figure": figure, "note": info.note}


def view_json(view: Any) -> str:
    """A view as JSON text (plotly's encoder: numpy arrays included)."""
    return to_json(view)


def _script_safe(text: str) -> str:
    # Inside <script>, "</" could close the element early; "<\/" means the same to JSON and JS.
    return text.replace("</", "<\\/")


def render_page(summary_json: str, *, embedded_json: str | None, plotly_src: str | None,
                poll_s: float | None) -> str:
    """The HTML page around a summary (and, for a report, every view embedded).

    ``plotly_src=None`` inlines plotly.js; ``poll_s=None`` never polls (a static report).
    """
    if plotly_src is None:
        plotly_tag = f"<script>{_script_safe(plotly_js())}</script>"
    else:
        plotly_tag = f'<script src="{plotly_src}"></script>'
    settings = {"pollMs": None if poll_s is None else int(poll_s * 1000),
                "live": poll_s is not None,
                "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    embedded = (f"<script type=\"application/json\" id=\"xe2t-embedded\">"
                f"{_script_safe(embedded_json)}</script>" if embedded_json is not None else "")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>xe2tune dashboard</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<link rel=\"icon\" href=\"data:,\">"
        f"<style>{PAGE_CSS}</style>{plotly_tag}</head><body>"
        "<header><h1>xe2tune</h1><span id=\"status\"></span></header>"
        "<section><h2>Roofline</h2><p id=\"empty\" class=\"note\" hidden>No measurements yet: "
        "run <code>xe2tune search</code>.</p>"
        "<div id=\"devices\" role=\"group\" aria-label=\"device of the roofline\"></div>"
        "<div id=\"rooflines\"><div class=\"roofline\"></div><p class=\"caption\"></p></div>"
        "</section>"
        "<section><h2>Best configs</h2><div id=\"filters\"></div>"
        "<div class=\"scroll\"><table id=\"best\"><thead></thead><tbody></tbody></table></div>"
        "<div id=\"pager\"></div></section>"
        "<section id=\"studies\"><h2>Studies</h2><select id=\"study\"></select>"
        "<div class=\"pair\"><div id=\"convergence\"></div><div id=\"importance\"></div></div>"
        "</section>"
        f"<script type=\"application/json\" id=\"xe2t-data\">"
        f"{_script_safe(summary_json)}</script>{embedded}"
        f"<script type=\"application/json\" id=\"xe2t-settings\">{json.dumps(settings)}</script>"
        f"<script>{PAGE_SCRIPT}</script></body></html>\n"
    )
