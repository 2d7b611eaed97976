"""The one module that imports plotly, lazily, so computing dashboard data never loads it.

The ``get_<plot>_info`` functions and their tests run without plotly in ``sys.modules``; only
the ``build_<plot>_figure`` builders and the page renderer call in here.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

# plotly.js's gl2d partial bundle, vendored (vendor/README.md): every trace type the dashboard
# draws (DRAWN_TRACE_TYPES), for figures written for this plotly.js version.
GL2D_BUNDLE = Path(__file__).with_name("vendor") / "plotly-gl2d.min.js"
GL2D_VERSION = "4.1.1"
DRAWN_TRACE_TYPES = frozenset({"scatter", "scattergl"})


def _plotly(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            "plotly is required to draw dashboards; install it with `pip install plotly`"
        ) from exc


def graph_objects() -> ModuleType:
    """``plotly.graph_objects``.

    Raises:
        ImportError: plotly is not installed.
    """
    return _plotly("plotly.graph_objects")


def plotly_js() -> str:
    """The minified plotly.js of the pages (never a CDN): the vendored ``gl2d`` partial bundle
    (the trace types the dashboard draws, a third of the full bundle's parse time) while the
    installed plotly writes figures for its version, else the installed plotly's full bundle.

    Raises:
        ImportError: plotly is not installed.
    """
    offline = _plotly("plotly.offline")
    if offline.get_plotlyjs_version() == GL2D_VERSION:
        return GL2D_BUNDLE.read_text(encoding="utf-8")
    return offline.get_plotlyjs()


def plotly_version() -> str:
    """The installed plotly version (makes the served asset's URL change with it).

    Raises:
        ImportError: plotly is not installed.
    """
    return _plotly("plotly").__version__


def to_json(document: Any) -> str:
    """JSON text of a document holding plotly figure dicts (numpy arrays included).

    plotly's own encoder, which uses orjson when it is installed: the roofline of 100,000
    measurements serialises in well under a second that way.

    Raises:
        ImportError: plotly is not installed.
    """
    return _plotly("plotly.io.json").to_json_plotly(document)
