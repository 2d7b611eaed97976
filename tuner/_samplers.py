"""The strategy registry: name -> sampler factory, imported lazily on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from xe2tune.errors import Xe2TuneError

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler

    from xe2tune.tuner._space import FiniteSpace

__all__ = ["DEFAULT_SAMPLER", "SAMPLER_NAMES", "UnknownSamplerError", "make_sampler"]

_SAMPLERS: dict[str, tuple[str, str]] = {
    "random": ("xe2tune.tuner._uninformed", "RandomSampler"),
    "grid": ("xe2tune.tuner._uninformed", "ExhaustiveSampler"),
    "gp": ("xe2tune.tuner._bayes", "GPSampler"),
    "tpe": ("xe2tune.tuner._tpe", "FiniteTPESampler"),
}
"""name -> (module, class); each class is a ``FiniteSpaceSampler`` taking (space, seed)."""

SAMPLER_NAMES: tuple[str, ...] = tuple(_SAMPLERS)
DEFAULT_SAMPLER = "random"


class UnknownSamplerError(Xe2TuneError):
    """A sampler name that is not registered."""


def make_sampler(name: str, space: FiniteSpace, seed: int | None = None) -> BaseSampler:
    """A fresh sampler proposing only valid, not-yet-evaluated configs of ``space``.

    Raises:
        UnknownSamplerError: ``name`` is not one of ``SAMPLER_NAMES``.
    """
    try:
        module, cls = _SAMPLERS[name]
    except KeyError:
        raise UnknownSamplerError(
            f"unknown sampler {name!r}; choose one of {', '.join(SAMPLER_NAMES)}"
        ) from None
    return getattr(importlib.import_module(module), cls)(space, seed)
