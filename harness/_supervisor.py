"""The parent's side of one device process: start it, talk to it, and kill it.

Only the lifecycle and the pipe live here; what a message means (which step, which limit, which
status a death becomes) is the trial runner's business.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from typing import Any

from xe2tune.errors import DeviceProcessError
from xe2tune.harness._device_process import DeviceProcessSpec

# A fresh interpreter, not a fork (the SYCL runtime is not fork-safe), and not multiprocessing's
# "spawn" either: that re-runs the parent's main module first (for the CLI, every command's
# imports: ~5 s of start-up).
_DEVICE_PROCESS_MAIN = "from xe2tune.harness._device_process import main; main()"


class DeviceProcessGone(Exception):
    """The device process is dead (killed, crashed or exited); :meth:`DeviceProcess.exit_reason`
    says how."""


class DeviceProcess:
    """One live device process on one device.

    Not thread-safe, except :meth:`kill`, which may be called from another thread or a signal
    handler to unblock a pending :meth:`receive`.
    """

    def __init__(self, spec: DeviceProcessSpec) -> None:
        """Start the device process (it reports ready once its device queue is open).

        Raises:
            OSError: if no process can be started at all.
        """
        self._started = time.monotonic()
        self._conn, child = multiprocessing.Pipe(duplex=True)
        lifeline, self._lifeline = os.pipe()
        self._killed = False
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _DEVICE_PROCESS_MAIN, str(child.fileno()), str(lifeline)],
                pass_fds=(child.fileno(), lifeline), stdin=subprocess.DEVNULL,
                stdout=2,  # the parent's stdout may be a --json document: runtime chatter to stderr
            )
        finally:
            child.close()  # so that the device process's death reads as end-of-file here
            os.close(lifeline)
        try:
            self._conn.send(spec)
        except OSError:
            pass  # it died at once: wait_ready reads the end of the pipe and says so
        self.pid = self._proc.pid
        self.startup_s: float | None = None

    def wait_ready(self, startup_s: float) -> None:
        """Wait until the device process has opened its device queue; sets :attr:`startup_s`.

        Raises:
            DeviceProcessError: if it reports an error, dies, or is not ready within ``startup_s``
                seconds of its start (it is killed then).
            DeviceProcessGone: if :meth:`kill` was called meanwhile.
        """
        try:
            message = self.receive(self._started + startup_s)
        except DeviceProcessGone:
            if self._killed:
                raise
            raise DeviceProcessError(
                f"the device process died while starting ({self.exit_reason()})") from None
        if message is None:
            self.kill()
            raise DeviceProcessError(f"the device process was not ready within {startup_s:.0f} s "
                              "(opening the device queue); it was killed")
        if message[0] == "error":
            self.kill()
            raise DeviceProcessError(f"the device process could not start: {message[1]}",
                                     message[2])
        self.startup_s = time.monotonic() - self._started

    def send(self, message: tuple[Any, ...]) -> None:
        """Send one message.

        Raises:
            DeviceProcessGone: if the device process is dead.
        """
        try:
            self._conn.send(message)
        except OSError:
            raise DeviceProcessGone from None

    def receive(self, deadline: float | None) -> tuple[Any, ...] | None:
        """The next message, or None once ``time.monotonic()`` passes ``deadline``.

        Raises:
            DeviceProcessGone: if the device process is dead and every message it sent has been
                read.
        """
        try:
            while True:
                wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
                if self._conn.poll(wait_s):
                    return self._conn.recv()
                if deadline is not None and time.monotonic() >= deadline:
                    return None
        except (EOFError, OSError):
            raise DeviceProcessGone from None

    def kill(self) -> None:
        """Kill the device process now (SIGKILL: it holds nothing worth saving). Idempotent."""
        self._killed = True
        if self._proc.poll() is None:
            self._proc.kill()

    @property
    def killed(self) -> bool:
        """Whether :meth:`kill` was called (by us, not by a signal from elsewhere)."""
        return self._killed

    def exit_reason(self) -> str:
        """How the device process ended, e.g. "signal 11 (SIGSEGV)" or "exit status 1"."""
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "still running"
        if code < 0:
            return f"signal {-code} ({signal.Signals(-code).name})"
        return f"exit status {code}"

    def close(self, grace_s: float = 5.0) -> None:
        """Ask the device process to stop; kill it if it has not within ``grace_s``. Idempotent."""
        try:
            self.send(("stop",))
        except DeviceProcessGone:
            pass
        try:
            self._proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
            self._proc.wait()
        self._conn.close()
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1
