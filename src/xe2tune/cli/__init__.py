"""The ``xe2tune`` command line: a thin composition root over the packages."""

from __future__ import annotations

import sys
import warnings
from typing import NoReturn

import typer

# Each module registers its commands on app, so all of them load on every start: they import
# the heavy packages (db, harness, tuner: SQLAlchemy, pandas, optuna, dpctl) only in command
# bodies, after the checks that need the arguments alone (tests/cli/test_cli_startup.py).
from xe2tune.cli import (
    _bench,  # noqa: F401  (each module registers its commands on app)
    _campaign,  # noqa: F401
    _campaign_tokens,  # noqa: F401
    _devices,  # noqa: F401
    _inspect,  # noqa: F401
    _query,  # noqa: F401
    _replay,  # noqa: F401
    _search,  # noqa: F401
    _serve,  # noqa: F401
    _worker,  # noqa: F401
)
from xe2tune.cli._app import app, err_console, print_error
from xe2tune.errors import Xe2TuneError

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point: every error a user can cause is one line and exit 2."""
    warnings.showwarning = _warning_line
    try:
        code = app(standalone_mode=False)
    except typer._click.exceptions.UsageError as exc:  # typer vendors click; no public alias
        command = exc.ctx.command_path if exc.ctx else "xe2tune"
        _one_line(f"{exc.format_message()} (see `{command} --help`)")
    except Xe2TuneError as exc:
        _one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    # Measurement caveats (a cache-resident rotation, say) are for the user, not a source line.
    err_console.print(f"[yellow]warning:[/] {' '.join(str(message).split())}", highlight=False,
                      soft_wrap=True)


def _one_line(message: str) -> NoReturn:
    print_error(message)
    sys.exit(2)
