"""The ``xe2tune`` command line: a thin composition root over the packages."""

from __future__ import annotations

import sys

from xe2tune.cli import (
    _bench,  # noqa: F401  (each module registers its commands on app)
    _devices,  # noqa: F401
    _query,  # noqa: F401
    _search,  # noqa: F401
    _serve,  # noqa: F401
)
from xe2tune.cli._app import app, err_console
from xe2tune.errors import Xe2TuneError

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point: run the app, turning our errors into one line and exit 2."""
    try:
        app()
    except Xe2TuneError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        err_console.print(f"[bold red]error:[/] {first_line}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
