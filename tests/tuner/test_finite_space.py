"""FiniteSpace built from value positions, and its index in any config order and size."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from xe2tune.tuner import EmptySpaceError, FiniteSpace

PARAMS = {"tile": (16, 32, 64), "flag": (False, True), "mode": ("a", "b", 1)}


def _both_ways(rows: list[tuple]) -> tuple[FiniteSpace, FiniteSpace]:
    names = list(PARAMS)
    ordinals = np.array([[PARAMS[n].index(v) for n, v in zip(names, row, strict=True)]
                         for row in rows], dtype=np.int64)
    return FiniteSpace(PARAMS, rows), FiniteSpace.from_ordinals(PARAMS, ordinals)


@pytest.mark.parametrize("shuffled", [False, True], ids=["product order", "any order"])
def test_from_ordinals_is_the_space_of_the_same_configs(shuffled):
    rows = [r for r in itertools.product(*PARAMS.values()) if r[0] != 32]
    if shuffled:
        random.Random(3).shuffle(rows)
    tuples, ordinals = _both_ways(rows)
    for space in (tuples, ordinals):
        assert space.configs == tuple(rows) and len(space) == len(rows)
        for i, row in enumerate(rows):
            params = dict(zip(PARAMS, row, strict=True))
            assert space.index(params) == i and space.config(i) == params
    assert (tuples.ordinals == ordinals.ordinals).all()
    assert tuples.index({"tile": 32, "flag": True, "mode": "a"}) is None


def test_index_tells_a_bool_from_an_int_and_refuses_strangers():
    space, _ = _both_ways([(16, True, 1), (16, False, "a")])
    assert space.index({"tile": 16, "flag": True, "mode": 1}) == 0
    assert space.index({"tile": 16, "flag": True, "mode": True}) is None
    assert space.index({"tile": 16, "flag": 1, "mode": 1}) is None
    assert space.index({"tile": 8, "flag": True, "mode": 1}) is None
    assert space.index({"tile": 16, "flag": True}) is None


def test_a_cartesian_product_beyond_int64_still_indexes():
    params = {f"p{i}": tuple(range(10)) for i in range(24)}  # 10**24 combinations
    rows = [tuple((i * 7 + j) % 10 for j in range(24)) for i in range(5)][::-1]
    space = FiniteSpace(params, rows)
    assert space.cartesian_size == 10**24
    for i, row in enumerate(rows):
        assert space.index(dict(zip(params, row, strict=True))) == i


def test_bad_ordinals_are_refused():
    with pytest.raises(ValueError, match="duplicates"):
        FiniteSpace.from_ordinals(PARAMS, np.array([[0, 1, 2], [0, 1, 2]]))
    with pytest.raises(ValueError, match="outside"):
        FiniteSpace.from_ordinals(PARAMS, np.array([[0, 2, 0]]))
    with pytest.raises(ValueError, match="shape"):
        FiniteSpace.from_ordinals(PARAMS, np.array([[0, 1]]))
    with pytest.raises(EmptySpaceError):
        FiniteSpace.from_ordinals(PARAMS, np.empty((0, 3), dtype=np.int64))
