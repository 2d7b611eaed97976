"""The typer application every command module registers on."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

app = typer.Typer(
    name="xe2tune",
    help="Autotune and benchmark flash-attention (SDPA) SYCL kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Piped output (logs, CI) would otherwise wrap tables at 80 columns into unreadable cells.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def fail(message: str) -> typer.Exit:
    """Print a one-line error and return the exit to raise (usage: ``raise fail(...)``)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)
