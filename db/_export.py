"""Exports of the best config per problem: JSON (round-trips) and a C++17 dispatch header."""

from __future__ import annotations

import json
from collections.abc import Sequence

from xe2tune.db._cpp import render_header
from xe2tune.db._records import BestResult

FORMAT = "xe2tune-best-configs"
VERSION = 1


def export_json(best: Sequence[BestResult]) -> str:
    """The best configs as JSON: ``{"format", "version", "configs": [BestResult, ...]}``."""
    document = {
        "format": FORMAT,
        "version": VERSION,
        "configs": [result.model_dump(mode="json", exclude={"query"}) for result in best],
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def load_json(text: str) -> list[BestResult]:
    """Parse what :func:`export_json` wrote.

    Raises:
        ValueError: not JSON, not this format or version, or a malformed entry.
    """
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not an {FORMAT} document")
    if document.get("version") != VERSION:
        raise ValueError(f"{FORMAT} version {document.get('version')!r} is not supported; "
                         f"accepted: {VERSION}")
    return [BestResult.model_validate(entry) for entry in document["configs"]]


def export_cpp(best: Sequence[BestResult]) -> str:
    """A self-contained C++17 header whose dispatch returns the same config as ``best``.

    See :mod:`xe2tune.db._cpp` for the header's vocabulary.
    """
    return render_header(best)
