"""Dashboards of tuning results: data per view in ``_get_*_info``, drawing in ``_build_*``.

The server (``xe2tune serve``) shows them live at ``/``; ``xe2tune report`` writes them into one
offline HTML file. plotly is imported only by ``_plotly_imports`` and only when drawing.
"""

from __future__ import annotations

from xe2tune.dashboards._collect import DashboardInfo, ImportanceSource, collect_dashboard_info
from xe2tune.dashboards._plotly_imports import plotly_js, plotly_version
from xe2tune.dashboards._service import DashboardCache, report_html

__all__ = [
    "DashboardCache",
    "DashboardInfo",
    "ImportanceSource",
    "collect_dashboard_info",
    "plotly_js",
    "plotly_version",
    "report_html",
]
