"""The module order handed to pytest-xdist (tests/_schedule.py): longest first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from _schedule import CACHE_KEY, RECORDED, module_seconds, order_longest_first


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


def test_the_recorded_seconds_name_every_test_module_and_no_other() -> None:
    tests = Path(__file__).parent
    modules = {str(p.relative_to(tests.parent)) for p in tests.rglob("test_*.py")}
    recorded = json.loads(RECORDED.read_text())
    assert set(recorded) == modules, "refresh tests/module_seconds.json (tests/_schedule.py)"
    assert all(seconds >= 0 for seconds in recorded.values())


class Cache:  # the one call module_seconds makes on pytest's cache
    def __init__(self, stored: dict[str, dict[str, float]]) -> None:
        self.stored = stored

    def get(self, key: str, default: dict[str, float]) -> dict[str, float]:
        return self.stored.get(key, default)


def test_a_run_of_this_checkout_overrides_the_recorded_seconds() -> None:
    recorded = json.loads(RECORDED.read_text())
    assert module_seconds(None) == module_seconds(Cache({})) == recorded
    seconds = module_seconds(Cache({CACHE_KEY: {"tests/test_schedule.py": 1234.5,
                                                "tests/new_module.py": 1.0}}))
    assert seconds["tests/test_schedule.py"] == 1234.5 and seconds["tests/new_module.py"] == 1.0
    assert seconds["tests/tuner/test_search.py"] == recorded["tests/tuner/test_search.py"]
