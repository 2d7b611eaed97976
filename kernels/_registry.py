"""Kernel families by name and by mode: the one place that knows which families exist."""

from __future__ import annotations

from xe2tune.errors import InvalidConfig
from xe2tune.kernels._decode import DecodeFamily
from xe2tune.kernels._family import KernelFamily
from xe2tune.kernels._prefill import PrefillFamily

_FAMILIES: dict[str, KernelFamily] = {f.name: f for f in (PrefillFamily(), DecodeFamily())}


def family_names() -> tuple[str, ...]:
    """Names of every registered family."""
    return tuple(_FAMILIES)


def get_family(name: str) -> KernelFamily:
    """The family called ``name``.

    Raises:
        InvalidConfig: if no family has that name (the message lists those that exist).
    """
    try:
        return _FAMILIES[name]
    except KeyError:
        raise InvalidConfig(
            f"unknown kernel family {name!r}; accepted: {', '.join(_FAMILIES)}"
        ) from None


def family_for_mode(mode: str) -> KernelFamily:
    """The family serving ``mode`` ("prefill" or "decode").

    Raises:
        InvalidConfig: if no family serves that mode.
    """
    for family in _FAMILIES.values():
        if family.mode == mode:
            return family
    modes = ", ".join(f.mode for f in _FAMILIES.values())
    raise InvalidConfig(f"no kernel family serves mode {mode!r}; accepted: {modes}")
