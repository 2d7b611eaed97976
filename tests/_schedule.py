"""The order pytest-xdist hands test modules to its workers: the longest first.

With ``--dist loadscope`` a module runs on one worker; xdist's own order (most tests first) left
the search and campaign modules, which hold few but long tests, for the end, where one worker ran
them alone while the other idled. Each run records every module's seconds (setup, call and
teardown of its tests, as measured by that run) in pytest's cache; the next run starts the
modules by those seconds, longest first. A fresh clone has no cache: it starts from
``tests/module_seconds.json``, the seconds of a recorded run (refresh it from a quiet, warm run
with ``cp .pytest_cache/v/xe2tune/module-seconds tests/module_seconds.json``). Ordered by
``slow`` marks instead, a fresh clone started the coordination module (90 s of stale-owner
waits, no slow test) last: 7 min 15 s against 6 min 19 s in the recorded order (2-vCPU Xeon,
no pytest cache, docs/first-contact.md). A module neither knows goes by its ``slow`` tests:
modules with more of them first, the others after every measured module, in collection order.
A module's own tests keep their order.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

CACHE_KEY = "xe2tune/module-seconds"
RECORDED = Path(__file__).with_name("module_seconds.json")


def module_seconds(cache: pytest.Cache | None) -> dict[str, float]:
    """Each module's seconds: this checkout's last run where it has one, else the recorded run."""
    measured = cache.get(CACHE_KEY, {}) if cache is not None else {}
    return {**json.loads(RECORDED.read_text()), **measured}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order_longest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sort ``items`` in place, module by module (see the module docstring)."""
    slow = Counter(module_of(item.nodeid) for item in items if item.get_closest_marker("slow"))
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(module_of(item.nodeid), index)

    def rank(item: pytest.Item) -> tuple[int, float, int]:
        module = module_of(item.nodeid)
        if module in seconds:
            return (1, -seconds[module], first_seen[module])
        return (0 if slow[module] else 2, -slow[module], first_seen[module])

    items.sort(key=rank)  # stable: a module's tests stay in their order


class ModuleSeconds:
    """Sums each module's test seconds from the reports; stores them at the end of the run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(session.config, "cache", None)  # None under -p no:cacheprovider
        if cache is None or not self.seconds:
            return
        stored = cache.get(CACHE_KEY, {})
        cache.set(CACHE_KEY, {**stored, **{m: round(s, 1) for m, s in self.seconds.items()}})
