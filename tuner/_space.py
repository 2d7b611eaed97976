"""A finite search space: named parameters, their ordered values, and the valid configs.

The tuner never searches a Cartesian product: a kernel family's restrictions (divisibility,
device limits, local memory) are solved up front, and the samplers only ever see the list of
valid configs. The same object serves a real search (configs from a ``KernelFamily``) and a
replayed one (configs from a recorded Kernel Tuner cache).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import CategoricalDistribution

from xe2tune.errors import Xe2TuneError

__all__ = ["EmptySpaceError", "FiniteSpace", "ParamValue"]

ParamValue = Any
"""A parameter value: int, float, str or bool (what ``CategoricalDistribution`` accepts)."""


class EmptySpaceError(Xe2TuneError):
    """A space without a single valid config: there is nothing to search."""


class FiniteSpace:
    """Parameters with ordered values, plus the valid configs as value tuples in parameter order.

    Immutable after construction. Configs are addressed by their index in ``configs``, which
    samplers use as the identity of a candidate; ``index`` maps a params dict back to it.

    Example:
        >>> space = FiniteSpace.from_params(
        ...     {"tile": [16, 32, 64], "stages": [1, 2]},
        ...     valid=lambda c: c["tile"] * c["stages"] <= 64,
        ... )
        >>> len(space), space.cartesian_size
        (5, 6)
        >>> space.config(space.index({"tile": 32, "stages": 2}))
        {'tile': 32, 'stages': 2}
    """

    def __init__(
        self,
        params: Mapping[str, Sequence[ParamValue]],
        configs: Iterable[Sequence[ParamValue]],
    ) -> None:
        """Build from per-parameter values and the valid configs (tuples in ``params`` order).

        Raises:
            ValueError: a parameter without values, a duplicate value, or a config whose length
                or values do not match ``params``.
            EmptySpaceError: no valid config.
        """
        self._names: tuple[str, ...] = tuple(params)
        self._values: dict[str, tuple[ParamValue, ...]] = {}
        self._positions: list[dict[tuple[bool, ParamValue], int]] = []
        for name, values in params.items():
            values = tuple(values)
            if not values:
                raise ValueError(f"parameter {name!r} has no values")
            position = {_key(v): i for i, v in enumerate(values)}
            if len(position) != len(values):
                raise ValueError(f"parameter {name!r} has duplicate values: {values}")
            self._values[name] = values
            self._positions.append(position)
        rows: list[tuple[int, ...]] = []
        for config in configs:
            rows.append(self._encode(tuple(config)))
        if not rows:
            raise EmptySpaceError(f"no valid config among {self.cartesian_size} combinations")
        self._ordinals = np.array(rows, dtype=np.int64)
        self._ordinals.setflags(write=False)
        self._configs = tuple(
            tuple(self._values[n][j] for n, j in zip(self._names, row, strict=True)) for row in rows
        )
        self._index = {_row_key(c): i for i, c in enumerate(self._configs)}
        if len(self._index) != len(self._configs):
            raise ValueError("the valid configs contain duplicates")

    @classmethod
    def from_params(
        cls,
        params: Mapping[str, Sequence[ParamValue]],
        valid: Callable[[dict[str, ParamValue]], bool] | Iterable[Mapping[str, ParamValue]],
    ) -> FiniteSpace:
        """Build from per-parameter values and either a validity predicate or the valid configs.

        Args:
            params: parameter name -> its values, in their natural order (the order matters to
                samplers that treat neighbouring values as similar).
            valid: a predicate over a config dict, applied to the Cartesian product; or the
                valid configs as dicts (keys = ``params``' names).

        Raises:
            ValueError: see ``__init__``; also a config dict with missing or extra names.
            EmptySpaceError: no valid config.
        """
        names = list(params)
        if callable(valid):
            product = (
                dict(zip(names, vs, strict=True)) for vs in itertools.product(*params.values())
            )
            rows: Iterable[Sequence[ParamValue]] = (tuple(c.values()) for c in product if valid(c))
        else:
            rows = (_row_from_dict(names, c) for c in valid)
        return cls(params, rows)

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names, in the order config tuples use."""
        return self._names

    @property
    def values(self) -> Mapping[str, tuple[ParamValue, ...]]:
        """Parameter name -> its ordered values."""
        return dict(self._values)

    @property
    def configs(self) -> tuple[tuple[ParamValue, ...], ...]:
        """The valid configs as value tuples in ``names`` order."""
        return self._configs

    @property
    def ordinals(self) -> np.ndarray:
        """Read-only (n_configs, n_params) array: each value's position in its parameter's list."""
        return self._ordinals

    @property
    def cartesian_size(self) -> int:
        """Size of the Cartesian product of all parameter values."""
        return int(np.prod([len(v) for v in self._values.values()], dtype=object))

    def __len__(self) -> int:
        return len(self._configs)

    def config(self, index: int) -> dict[str, ParamValue]:
        """The config at ``index`` as a params dict."""
        return dict(zip(self._names, self._configs[index], strict=True))

    def index(self, config: Mapping[str, ParamValue]) -> int | None:
        """Index of a params dict among the valid configs, or None if it is not one of them."""
        if set(config) != set(self._names):
            return None
        return self._index.get(_row_key(tuple(config[n] for n in self._names)))

    def distributions(self) -> dict[str, CategoricalDistribution]:
        """One ``CategoricalDistribution`` per parameter: what ``study.ask`` should be given."""
        return {n: CategoricalDistribution(self._values[n]) for n in self._names}

    def _encode(self, row: tuple[ParamValue, ...]) -> tuple[int, ...]:
        if len(row) != len(self._names):
            raise ValueError(f"config {row} has {len(row)} values, expected {len(self._names)}")
        try:
            return tuple(p[_key(v)] for p, v in zip(self._positions, row, strict=True))
        except KeyError:
            raise ValueError(f"config {row} has a value outside {self._values}") from None


def _key(value: ParamValue) -> tuple[bool, ParamValue]:
    # True == 1 in Python; the flag keeps a bool and an int value apart (1 and 1.0 stay equal).
    return (isinstance(value, (bool, np.bool_)), value)


def _row_key(row: tuple[ParamValue, ...]) -> tuple[tuple[bool, ParamValue], ...]:
    return tuple(_key(v) for v in row)


def _row_from_dict(names: list[str], config: Mapping[str, ParamValue]) -> tuple[ParamValue, ...]:
    if set(config) != set(names):
        raise ValueError(f"config {dict(config)} does not have exactly the parameters {names}")
    return tuple(config[n] for n in names)
