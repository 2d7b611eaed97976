"""The failure taxonomy. Errors are classified once, where they happen, never by message text."""

from __future__ import annotations


class Xe2TuneError(Exception):
    """Root of every error xe2tune raises on purpose; the CLI prints these as one line."""


class DeviceError(Xe2TuneError):
    """No SYCL device, or a device filter that matches none."""


class InvalidConfig(Xe2TuneError):
    """A launcher config that cannot run on this problem and device; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidProblem(Xe2TuneError):
    """A problem (shapes, dtype, mode) outside what the kernels support."""


class KernelCompileError(Xe2TuneError):
    """The SYCL runtime compiler rejected a source; carries the full build log."""

    def __init__(self, message: str, log: str, source_path: str | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.source_path = source_path

    def __str__(self) -> str:
        where = f" (source: {self.source_path})" if self.source_path else ""
        return f"{self.args[0]}{where}\n{self.log}"


class LaunchResourceError(Xe2TuneError):
    """The device refused the launch (work-group size, local memory, ...)."""


class WrongResultError(Xe2TuneError):
    """A kernel's output failed the correctness check against the reference."""


class BenchTimeout(Xe2TuneError):
    """A measurement exceeded its time budget before producing a single timed sample."""


class StoreError(Xe2TuneError):
    """The results database could not be opened, migrated, read or written."""


class NoDatabase(StoreError):
    """A reader found no results database where it looked: nothing was ever tuned there."""


class TrialAbandoned(Xe2TuneError):
    """The trial in progress was abandoned on request (``TrialRunner.abandon``); record nothing:
    its config stays untried."""


class DeviceProcessError(Xe2TuneError):
    """The device process could not start, or failed in a way no config explains (a bug or a
    broken device runtime); ``details`` holds the device process's traceback when there is
    one."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details
