"""Validity rules written once, checked per config and over a whole parameter grid.

A family's space is a Cartesian grid of a few hundred thousand points, but each validity rule
reads two or three of its parameters. A :class:`Rule` names the parameters it reads, so the grid
is judged rule by rule over only those parameters' values (2 to 5,400 calls a rule) and the
verdicts are broadcast: the same rule function, with the same reason text, serves
``invalid_reason`` for one config and :func:`grid_mask` for every point of the space.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from xe2tune.kernels._config import LauncherConfig


@dataclass(frozen=True)
class Rule:
    """One validity rule: ``reason(params)`` is None when the params pass, else why not.

    ``reason`` must read only the parameters named in ``reads``: over the grid it is given a
    mapping of just those (reading another raises KeyError), per config all of them.
    """

    reads: tuple[str, ...]
    reason: Callable[[Mapping[str, Any]], str | None]


def check(reads: tuple[str, ...], ok: Callable[[Mapping[str, Any]], bool],
          why: Callable[[Mapping[str, Any]], str]) -> Rule:
    """The rule that passes where ``ok(params)`` holds and otherwise gives ``why(params)``."""
    return Rule(reads, lambda p: None if ok(p) else why(p))


def first_reason(rules: Sequence[Rule], params: Mapping[str, Any]) -> str | None:
    """The reason of the first rule the params fail, or None when they pass every rule."""
    for rule in rules:
        reason = rule.reason(params)
        if reason is not None:
            return reason
    return None


def grid_mask(space: Mapping[str, Sequence[Any]], rules: Sequence[Rule],
              fixed: Mapping[str, Any] | None = None) -> np.ndarray:
    """Boolean array over the grid (one axis per parameter, in ``space`` order): True where
    every rule passes. Flattened in C order it follows ``itertools.product`` of the values.

    ``fixed`` gives the value of a parameter a rule reads that is not an axis of this space (a
    knob a family's space leaves out, which its configs then hold at its default).
    """
    names = list(space)
    fixed = fixed or {}
    mask = np.ones([len(space[n]) for n in names], dtype=bool)
    for rule in rules:
        axes = sorted({n for n in rule.reads if n in space}, key=names.index)
        held = {n: fixed[n] for n in rule.reads if n not in space}
        verdicts = np.array(
            [rule.reason({**held, **dict(zip(axes, values, strict=True))}) is None
             for values in itertools.product(*(space[n] for n in axes))], dtype=bool)
        # Size-1 axes for the parameters the rule does not read: numpy broadcasts over them.
        mask &= verdicts.reshape([len(space[n]) if n in axes else 1 for n in names])
    return mask


@dataclass(frozen=True)
class ValidGrid:
    """The valid points of a family's space for one problem and device, in grid order.

    ``space`` is the family's parameter space (name -> ordered values) and ``ordinals`` an
    (n_valid, n_params) int64 array: row i holds, per parameter, the position of valid point
    i's value in that parameter's values. Index i is the i-th config ``valid_configs`` yields.
    """

    space: Mapping[str, tuple[Any, ...]]
    ordinals: np.ndarray

    @classmethod
    def from_mask(cls, space: Mapping[str, Sequence[Any]], mask: np.ndarray) -> ValidGrid:
        """The True points of a :func:`grid_mask`, in ``itertools.product`` order."""
        ordinals = np.argwhere(mask).astype(np.int64, copy=False)
        ordinals.setflags(write=False)
        return cls({n: tuple(v) for n, v in space.items()}, ordinals)

    def __len__(self) -> int:
        return len(self.ordinals)

    def params(self, index: int) -> dict[str, Any]:
        """The params dict of valid point ``index``."""
        return {n: values[j] for (n, values), j
                in zip(self.space.items(), self.ordinals[index].tolist(), strict=True)}


class GridConfigs(Sequence[LauncherConfig]):
    """The configs of a :class:`ValidGrid`, each made from its params when first asked for.

    A study addresses configs by index and touches a few hundred of a space's 100,000: making
    every LauncherConfig up front would cost more than judging the whole grid.
    """

    def __init__(self, grid: ValidGrid,
                 make: Callable[[Mapping[str, Any]], LauncherConfig]) -> None:
        self.grid = grid
        self._make = make

    def __len__(self) -> int:
        return len(self.grid)

    @overload
    def __getitem__(self, index: int) -> LauncherConfig: ...

    @overload
    def __getitem__(self, index: slice) -> list[LauncherConfig]: ...

    def __getitem__(self, index: int | slice) -> LauncherConfig | list[LauncherConfig]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"config index {index} outside 0..{len(self) - 1}")
        return self._make(self.grid.params(index))

    def __iter__(self) -> Iterator[LauncherConfig]:
        for i in range(len(self)):
            yield self[i]
