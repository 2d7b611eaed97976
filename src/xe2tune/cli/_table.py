"""Tables that fit the console they print to: whole cells, fewer columns, details below a row.

Rich shrinks a table that is wider than the console by folding or cutting cells ("3.9... ms").
A measured figure must never be cut, so these tables are laid out here instead: each column is
as wide as its widest cell; when the row does not fit, the optional columns are dropped, lowest
priority first (the table says which); a row's long free text (a config) goes on its own
wrapped line below the row.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

GAP = 2  # spaces between columns
DETAIL_INDENT = "    "


@dataclass(frozen=True)
class Column:
    """A table column. ``drop`` None: always shown; else dropped before lower ``drop`` ranks
    (the highest rank goes first) when the table would not fit."""

    header: str
    right: bool = False  # numbers align right
    drop: int | None = None


def fitted_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]],
                   width: int) -> list[int]:
    """Indices of the columns shown at ``width``: all, or without the optional ones that do not
    fit, highest drop rank first. The required ones are always kept, even when too wide."""
    widths = [max([len(c.header), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    optional = sorted((i for i, c in enumerate(columns) if c.drop is not None),
                      key=lambda i: -(columns[i].drop or 0))
    while sum(widths[i] for i in shown) + GAP * (len(shown) - 1) > width and optional:
        shown.remove(optional.pop(0))
    return shown


def print_table(console: Console, title: str | None, columns: Sequence[Column],
                rows: Sequence[Sequence[str]], details: Sequence[str | None] = (), *,
                more: str = "--json") -> None:
    """Print ``rows`` (plain strings) under ``columns`` to fit ``console.width``; ``details[i]``,
    when given, is printed wrapped on the lines below row i; ``more`` is the option that
    prints every field, named when columns had to go."""
    width = console.width
    shown = fitted_columns(columns, rows, width)
    widths = {i: max([len(columns[i].header), *(len(r[i]) for r in rows)]) for i in shown}

    def line(cells: Sequence[str]) -> str:
        parts = [cells[i].rjust(widths[i]) if columns[i].right else cells[i].ljust(widths[i])
                 for i in shown]
        return (" " * GAP).join(parts).rstrip()

    if title:
        console.print(Text(title, style="bold"))
    console.print(Text(line([c.header for c in columns]), style="bold"), soft_wrap=True)
    for n, row in enumerate(rows):
        console.print(line(row), highlight=False, markup=False, soft_wrap=True)
        detail = details[n] if n < len(details) else None
        if detail:
            wrapped = textwrap.wrap(detail, max(width - len(DETAIL_INDENT), 20),
                                    break_long_words=False, break_on_hyphens=False)
            for part in wrapped:
                console.print(DETAIL_INDENT + part, highlight=False, markup=False,
                              soft_wrap=True)
    hidden = [columns[i].header for i in range(len(columns)) if i not in shown]
    if hidden:
        console.print(f"(not shown at {width} columns: {', '.join(hidden)}; {more} prints "
                      "every field)", style="dim", highlight=False, markup=False)
