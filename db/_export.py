"""Exports of the best config per problem: JSON (round-trips) and a C++17 dispatch header."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from xe2tune.db._cpp import render_header
from xe2tune.db._records import BestResult
from xe2tune.errors import InvalidConfig
from xe2tune.kernels import LauncherConfig

FORMAT = "xe2tune-best-configs"
# 2: configs name their family (and hash it); entries carry seeded baselines. 3: problems name
# head_dim_v and kv_dtype, so a reader that predates them refuses the document instead of
# serving an MLA or FP8 K/V config as MHA (versions 1 and 2 read with Dv = D, K/V in dtype).
VERSION = 3
READABLE = (1, 2, 3)


def export_json(best: Sequence[BestResult]) -> str:
    """The best configs as JSON: ``{"format", "version", "configs": [BestResult, ...]}``.

    Each entry's ``family`` is its config's kernel family; ``baselines`` lists the seeded
    baselines stored for its problem with their times and the best's speedup over each.
    """
    document = {
        "format": FORMAT,
        "version": VERSION,
        "configs": [result.model_dump(mode="json", exclude={"query"}) for result in best],
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _from_version_1(entry: Any) -> Any:
    """A version-1 entry as version 2: its config gains the entry's family and is rehashed."""
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        return entry
    try:
        config = LauncherConfig.from_dict(entry["config"], family=entry.get("family"))
    except InvalidConfig as exc:
        raise ValueError(f"malformed version-1 entry: {exc}") from exc
    return {**entry, "config": config.to_dict(), "config_hash": config.config_hash()}


def load_json(text: str) -> list[BestResult]:
    """Parse what :func:`export_json` wrote (this version or version 1, upgraded on reading).

    Raises:
        ValueError: not JSON, not this format or a readable version, or a malformed entry.
    """
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not an {FORMAT} document")
    version = document.get("version")
    if version not in READABLE:
        raise ValueError(f"{FORMAT} version {version!r} is not supported; "
                         f"accepted: {', '.join(map(str, READABLE))}")
    entries = document["configs"]
    if version == 1:
        entries = [_from_version_1(entry) for entry in entries]
    return [BestResult.model_validate(entry) for entry in entries]


def export_cpp(best: Sequence[BestResult]) -> str:
    """A self-contained C++17 header whose dispatch returns the same config as ``best``.

    See :mod:`xe2tune.db._cpp` for the header's vocabulary.
    """
    return render_header(best)
