"""A finite search space: named parameters, their ordered values, and the valid configs.

The tuner never searches a Cartesian product: a kernel family's restrictions (divisibility,
device limits, local memory) are solved up front, and the samplers only ever see the list of
valid configs. The same object serves a real search (configs from a ``KernelFamily``) and a
replayed one (configs from a recorded Kernel Tuner cache).
"""

from __future__ import annotations

import functools
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
        self._set_values(params)
        rows = [self._encode(tuple(config)) for config in configs]
        self._set_ordinals(np.array(rows, dtype=np.int64).reshape(len(rows), len(self._names)))

    def _set_values(self, params: Mapping[str, Sequence[ParamValue]]) -> None:
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

    def _set_ordinals(self, ordinals: np.ndarray) -> None:
        if not len(ordinals):
            raise EmptySpaceError(f"no valid config among {self.cartesian_size} combinations")
        ordinals.setflags(write=False)
        self._ordinals = ordinals
        # Each config's position in the Cartesian product, sorted for ``index``: a dict of
        # 100,000 tuples would take longer to build than the whole space.
        sizes = [len(v) for v in self._values.values()]
        dtype = np.int64 if self.cartesian_size < 2**63 else object
        codes = np.zeros(len(ordinals), dtype=dtype)
        for j, size in enumerate(sizes):
            codes = codes * size + ordinals[:, j].astype(dtype)
        steps = np.diff(codes)
        self._order: np.ndarray | None = None  # None: the configs are in product order
        if not (steps > 0).all():
            self._order = np.argsort(codes, kind="stable")
            codes = codes[self._order]
            steps = np.diff(codes)
        if (steps == 0).any():
            raise ValueError("the valid configs contain duplicates")
        self._codes = codes
        self._sizes = sizes

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

    @classmethod
    def from_ordinals(
        cls, params: Mapping[str, Sequence[ParamValue]], ordinals: np.ndarray
    ) -> FiniteSpace:
        """Build from per-parameter values and the valid configs as value positions: row i
        holds, per parameter, the position of config i's value in that parameter's values
        (what ``KernelFamily.valid_grid`` gives, without a tuple per config).

        Raises:
            ValueError: see ``__init__``; also ordinals of the wrong shape or out of range.
            EmptySpaceError: no valid config.
        """
        space = cls.__new__(cls)  # __init__ would encode value tuples; these are encoded
        space._set_values(params)
        ordinals = np.array(ordinals, dtype=np.int64)
        sizes = np.array([len(v) for v in space._values.values()], dtype=np.int64)
        if ordinals.ndim != 2 or ordinals.shape[1] != len(sizes):
            raise ValueError(f"ordinals of shape {ordinals.shape}, expected (n, {len(sizes)})")
        if ((ordinals < 0) | (ordinals >= sizes)).any():
            raise ValueError("ordinals outside their parameters' values")
        space._set_ordinals(ordinals)
        return space

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names, in the order config tuples use."""
        return self._names

    @property
    def values(self) -> Mapping[str, tuple[ParamValue, ...]]:
        """Parameter name -> its ordered values."""
        return dict(self._values)

    @functools.cached_property
    def configs(self) -> tuple[tuple[ParamValue, ...], ...]:
        """The valid configs as value tuples in ``names`` order (made on first use)."""
        columns = [[values[j] for j in self._ordinals[:, i].tolist()]
                   for i, values in enumerate(self._values.values())]
        return tuple(zip(*columns, strict=True))

    @property
    def ordinals(self) -> np.ndarray:
        """Read-only (n_configs, n_params) array: each value's position in its parameter's list."""
        return self._ordinals

    @property
    def cartesian_size(self) -> int:
        """Size of the Cartesian product of all parameter values."""
        return int(np.prod([len(v) for v in self._values.values()], dtype=object))

    def __len__(self) -> int:
        return len(self._ordinals)

    def config(self, index: int) -> dict[str, ParamValue]:
        """The config at ``index`` as a params dict."""
        return {n: self._values[n][j]
                for n, j in zip(self._names, self._ordinals[index].tolist(), strict=True)}

    def index(self, config: Mapping[str, ParamValue]) -> int | None:
        """Index of a params dict among the valid configs, or None if it is not one of them."""
        if set(config) != set(self._names):
            return None
        code = 0
        for name, size, position in zip(self._names, self._sizes, self._positions, strict=True):
            j = position.get(_key(config[name]))
            if j is None:
                return None
            code = code * size + j
        i = int(np.searchsorted(self._codes, code))
        if i == len(self._codes) or self._codes[i] != code:
            return None
        return i if self._order is None else int(self._order[i])

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


def _row_from_dict(names: list[str], config: Mapping[str, ParamValue]) -> tuple[ParamValue, ...]:
    if set(config) != set(names):
        raise ValueError(f"config {dict(config)} does not have exactly the parameters {names}")
    return tuple(config[n] for n in names)
