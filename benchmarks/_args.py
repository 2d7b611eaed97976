"""Command-line value types the benchmarks share."""

from __future__ import annotations

import argparse


def heads_pair(text: str) -> tuple[int, int]:
    """``Q/KV``: query and KV heads, Q a positive multiple of KV (an argparse type)."""
    try:
        heads_q, heads_kv = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not query/KV heads such as 32/8") from None
    if heads_kv < 1 or heads_q < 1 or heads_q % heads_kv:
        raise argparse.ArgumentTypeError(
            f"{text}: query heads must be a positive multiple of the KV heads")
    return heads_q, heads_kv
