"""The one module that imports plotly, lazily, so computing dashboard data never loads it.

The ``_get_<plot>_info`` functions and their tests run without plotly in ``sys.modules``; only
the ``_build_<plot>_figure`` builders and the page renderer call in here.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


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
    """The minified plotly.js bundled with the installed plotly package (no CDN).

    Raises:
        ImportError: plotly is not installed.
    """
    return _plotly("plotly.offline").get_plotlyjs()


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
