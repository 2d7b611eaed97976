"""Dashboards of tuning results: data per view in ``get_*_info``, drawing in ``build_*``.

The server (``xe2tune serve``) shows them live at ``/``, a summary first and each view fetched
when shown; ``xe2tune report`` writes them, bounded, into one offline HTML file.
plotly is imported only by ``_plotly_imports`` and only when drawing.
"""

from __future__ import annotations

from xe2tune.dashboards._best_table import MAX_PAGE_ROWS, BestPageQuery, SortKey
from xe2tune.dashboards._collect import DashboardSummary, ImportanceSource, collect_summary
from xe2tune.dashboards._plotly_imports import plotly_js, plotly_version
from xe2tune.dashboards._roofline import MAX_POINTS as ROOFLINE_POINTS
from xe2tune.dashboards._service import (
    DashboardCache,
    DashboardViews,
    open_dashboard_views,
    report_html,
)

__all__ = [
    "MAX_PAGE_ROWS",
    "ROOFLINE_POINTS",
    "BestPageQuery",
    "DashboardCache",
    "DashboardViews",
    "DashboardSummary",
    "ImportanceSource",
    "SortKey",
    "collect_summary",
    "plotly_js",
    "plotly_version",
    "open_dashboard_views",
    "report_html",
]
