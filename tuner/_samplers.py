"""The strategy registry: name -> sampler factory, imported lazily on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from xe2tune.errors import Xe2TuneError

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler

    from xe2tune.tuner._space import FiniteSpace

__all__ = ["DEFAULT_SAMPLER", "SAMPLER_NAMES", "UnknownSamplerError", "make_sampler"]

_SAMPLERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gp-portfolio": ("xe2tune.tuner._bayes", "PortfolioSampler", {}),
    "gp-mixed": ("xe2tune.tuner._bayes", "GPSampler", {"encodings": ("ordinal", "onehot")}),
    "gp-ordinal": ("xe2tune.tuner._bayes", "GPSampler", {"encodings": ("ordinal",)}),
    "tpe": ("xe2tune.tuner._tpe", "FiniteTPESampler", {}),
    "random": ("xe2tune.tuner._uninformed", "RandomSampler", {}),
    "grid": ("xe2tune.tuner._uninformed", "ExhaustiveSampler", {}),
}
"""name -> (module, class, keyword options); each class is a ``FiniteSpaceSampler``."""

SAMPLER_NAMES: tuple[str, ...] = tuple(_SAMPLERS)
DEFAULT_SAMPLER = "gp-portfolio"
"""Chosen by measurement: benchmarks/strategies.py on recorded spaces (see its docstring)."""


class UnknownSamplerError(Xe2TuneError):
    """A sampler name that is not registered."""


def make_sampler(name: str, space: FiniteSpace, seed: int | None = None) -> BaseSampler:
    """A fresh sampler proposing only valid, not-yet-evaluated configs of ``space``.

    Args:
        name: one of ``SAMPLER_NAMES`` (``DEFAULT_SAMPLER`` when unsure).
        space: the valid configs of the study's family for its problem and device.
        seed: the sampler's random seed (None: random).

    Raises:
        UnknownSamplerError: ``name`` is not one of ``SAMPLER_NAMES``.
    """
    try:
        module, cls, options = _SAMPLERS[name]
    except KeyError:
        raise UnknownSamplerError(
            f"unknown sampler {name!r}; choose one of {', '.join(SAMPLER_NAMES)}"
        ) from None
    return getattr(importlib.import_module(module), cls)(space, seed, **options)
