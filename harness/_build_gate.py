"""Builds and timings take turns where they share the host's cores.

On a device that is the host's CPU a build beside a timed kernel would take the cores the kernel
runs on, and the timing would be wrong. Builds may still run beside anything untimed (another
build, a verification, the reference): the gate lets any number of builds in at once, but a
timing first stops new builds from starting, waits for those in flight, and holds them all off
until it ends. Elsewhere (a GPU) the gate lets everything through.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from xe2tune.kernels import DeviceCaps


def overlaps_builds(caps: DeviceCaps) -> bool:
    """Whether builds may run while a kernel is timed: only where the device is not the host's
    CPU (there a build would take the cores the timed kernel runs on)."""
    return caps.device_type != "cpu"


class BuildGate:
    """Keeps builds (any threads) and timings (one thread at a time) apart when ``exclusive``."""

    def __init__(self, exclusive: bool) -> None:
        self.exclusive = exclusive
        self._turns = threading.Condition()
        self._builds = 0
        self._timing = False

    @contextmanager
    def building(self) -> Iterator[None]:
        """Hold for the length of a build; waits while a timing runs."""
        if not self.exclusive:
            yield
            return
        with self._turns:
            self._turns.wait_for(lambda: not self._timing)
            self._builds += 1
        try:
            yield
        finally:
            with self._turns:
                self._builds -= 1
                self._turns.notify_all()

    @contextmanager
    def timing(self, waiting: Callable[[], None]) -> Iterator[None]:
        """Hold for the length of one or more timings: no build starts meanwhile, and the
        builds in flight are waited for first (``waiting`` is called before that wait, only
        when there is one). Not reentrant."""
        if not self.exclusive:
            yield
            return
        with self._turns:
            self._timing = True  # from here on no build starts
            in_flight = self._builds > 0
        try:
            if in_flight:
                waiting()
            with self._turns:
                self._turns.wait_for(lambda: self._builds == 0)
            yield
        finally:
            with self._turns:
                self._timing = False
                self._turns.notify_all()
