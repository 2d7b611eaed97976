"""Ctrl-C and SIGTERM during a long command (``search``, ``worker``): stop after the trial in
flight, abandoned (it goes back untried), and exit 128 + the signal; a second signal aborts."""

from __future__ import annotations

import signal
from collections.abc import Callable


class StopOnSignal:
    """Context manager installing the SIGINT/SIGTERM handlers of a long command.

    Args:
        runner: the trial runner (a ``TrialRunner``; typed loosely because the device side loads
            lazily): its ``abandon()`` ends the trial in flight, which stays untried.
        notice: printed once, on the first signal (``None``: silent).
    """

    def __init__(self, runner, notice: Callable[[], None] | None = None) -> None:  # noqa: ANN001
        self.runner = runner
        self.notice = notice
        self.signum = 0  # the signal that asked for the stop; 0 while none did
        self._previous: dict[int, object] = {}

    def requested(self) -> bool:
        return self.signum != 0

    def _handle(self, signum: int, _frame: object) -> None:
        if self.signum:
            raise KeyboardInterrupt
        self.signum = signum
        if self.notice is not None:
            self.notice()
        self.runner.abandon()

    def __enter__(self) -> StopOnSignal:
        self._previous = {sig: signal.signal(sig, self._handle)
                          for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *_: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
