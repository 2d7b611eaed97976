"""The typer application every command module registers on."""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

import typer
from rich.console import Console
from rich.text import Text

app = typer.Typer(
    name="xe2tune",
    help="Autotune and benchmark flash-attention (SDPA) SYCL kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Click's plain help: typer's rich panels print every flag with a value type
    # ("--help <bool>", "--json <bool>") although a flag takes none.
    rich_markup_mode=None,
)
PIPED_WIDTH = 160  # piped output (logs, CI) has no terminal; 80 would fold every table


def _width(stream: TextIO) -> int | None:
    """The terminal's width (None: rich asks it, and reads COLUMNS first), else PIPED_WIDTH."""
    return None if stream.isatty() or os.environ.get("COLUMNS") else PIPED_WIDTH


console = Console(width=_width(sys.stdout))
err_console = Console(stderr=True, width=_width(sys.stderr))


def json_requested() -> bool:
    """Whether the command line asks for ``--json`` output (usage errors included, which
    happen before a command runs). ``--format json`` (results, export) selects a data format:
    its errors stay on stderr, so that stdout never holds anything but the data."""
    return "--json" in sys.argv[1:]


def print_error(message: str) -> None:
    """One error line on stderr, or under ``--json`` one JSON object on stdout, where a
    script reading the JSON looks: ``{"error": message}``."""
    message = " ".join(message.split())
    if json_requested():
        print(json.dumps({"error": message}), flush=True)
    else:  # the message is text, not markup: "[1, 2]" must print as such
        err_console.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)


def fail(message: str) -> typer.Exit:
    """Print a one-line error and return the exit to raise (usage: ``raise fail(...)``)."""
    print_error(message)
    return typer.Exit(code=2)
