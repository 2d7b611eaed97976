"""The module order handed to pytest-xdist (tests/_schedule.py): longest first."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from _schedule import order_longest_first


@dataclass
class Item:  # the two things the order reads of a pytest.Item
    nodeid: str
    slow: bool = False

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return pytest.mark.slow.mark if name == "slow" and self.slow else None


def ids(items: list[Item]) -> list[str]:
    return [item.nodeid for item in items]


def test_measured_modules_go_longest_first_and_keep_their_tests_order() -> None:
    items = [Item("a.py::1"), Item("a.py::2"), Item("b.py::1"), Item("c.py::1"), Item("c.py::2")]
    order_longest_first(items, {"a.py": 3.0, "b.py": 50.0, "c.py": 7.5})
    assert ids(items) == ["b.py::1", "c.py::1", "c.py::2", "a.py::1", "a.py::2"]


def test_unmeasured_modules_go_by_their_slow_tests() -> None:
    items = [Item("a.py::1"), Item("b.py::1", slow=True), Item("c.py::1", slow=True),
             Item("c.py::2", slow=True), Item("d.py::1")]
    order_longest_first(items, {"d.py": 1.0})
    # most slow tests first, then the measured modules, then the rest in collection order
    assert ids(items) == ["c.py::1", "c.py::2", "b.py::1", "d.py::1", "a.py::1"]
