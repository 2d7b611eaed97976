"""The device process: a process that owns a queue on one device and runs trials on request.

The supervisor (:mod:`xe2tune.harness._supervisor`) starts it as a fresh interpreter running
:func:`main` (the SYCL runtime is not fork-safe), hands it a connection and a lifeline pipe, sends
the :class:`DeviceProcessSpec`, then talks to it in tuples of plain data:

- to the device process: ``("measure", request)``, ``("compare", [request, ...], rounds)``,
  ``("prebuild", request)``, ``("stop",)``; a request is ``MeasureRequest.to_dict()``;
- from the device process: ``("ready", startup_s)`` once; ``("phase", name, config_hash, t)`` when a
  step of a trial starts (``t`` is ``time.monotonic()``, one clock for every process of the
  host); ``("background", "build" | "built", config_hash, t)`` around a background build (sent
  at any time, also between requests); ``("warning", text)``; then
  ``("result", TrialResult.to_dict())`` or ``("results", [...])``; or
  ``("error", message, traceback)`` when something no config explains went wrong, after which
  the device process exits.

Prebuilds run on ``build_threads`` threads beside whatever the device process does, except
where ``overlap_builds`` is off (the device is the host's CPU): there a timing waits for the
builds in flight and no build starts until it ends (:class:`BuildGate`), and a prebuild waits
until a measurement needs a config not built yet; then that config and the ones asked after it
start together, ``build_threads`` at a time. Started as they were asked, one new build came per
trial and ran alone, each timing waiting for it with a core idle (measured on 2 cores: one
build or none in flight for 106 of the 113 s of a cold `search --head-dim 128`); batched, the
builds of two trials run at once and the configs already built are timed back to back.

The device process also obeys the test-only planted faults of ``XE2TUNE_FAULTS``
(:func:`xe2tune.config.planted_faults`).
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from xe2tune.config import planted_faults
from xe2tune.harness._bench import BenchSettings
from xe2tune.harness._build_gate import BuildGate
from xe2tune.harness._device import device_caps, open_queue
from xe2tune.harness._peaks import DevicePeaks
from xe2tune.harness._roofline import RooflineModel
from xe2tune.harness._runner import ConfigRunner, MeasureRequest
from xe2tune.kernels import load_extension


@dataclass(frozen=True)
class DeviceProcessSpec:
    """What a device process needs to measure like the parent would: the device and how to
    measure."""

    device: str  # SYCL filter string of the device
    settings: BenchSettings
    peaks: DevicePeaks | None
    llc_bytes: int
    overlap_builds: bool  # builds may run beside a timing (not where the device is the host CPU)
    build_threads: int = 2  # prebuilds compiled at once


Send = Callable[[tuple[Any, ...]], None]


class _Hooks:
    """Reports each step to the supervisor (which times it) and plants the test-only faults."""

    def __init__(self, send: Send, faults: dict[str, str]) -> None:
        self._send = send
        self._faults = faults

    def phase(self, name: str, config_hash: str) -> None:
        self._send(("phase", name, config_hash, time.monotonic()))
        self.plant(name, config_hash)

    def plant(self, step: str, config_hash: str) -> None:
        fault = self._faults.get(config_hash)
        if (fault, step) in (("build_hang", "build"), ("run_hang", "time")):
            threading.Event().wait()  # never returns, like a hung compiler or launch
        if (fault, step) == ("crash", "verify"):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
            os.kill(os.getpid(), signal.SIGSEGV)

    def output(self, config_hash: str, out: np.ndarray) -> np.ndarray:
        if self._faults.get(config_hash) == "wrong_result":
            return -out
        return out


class _DeviceServer:
    """The device process's state: its runner, and the background builds not yet waited for."""

    def __init__(self, spec: DeviceProcessSpec, send: Send) -> None:
        queue = open_queue(spec.device)
        load_extension()
        self.send = send
        self.hooks = _Hooks(send, planted_faults())
        self.runner = ConfigRunner(
            queue, device_caps(queue.sycl_device),
            RooflineModel(spec.peaks) if spec.peaks is not None else None,
            spec.settings, spec.llc_bytes, self.hooks,
            BuildGate(exclusive=not spec.overlap_builds),
        )
        self._threads = max(1, spec.build_threads)
        self._builds = ThreadPoolExecutor(self._threads, "xe2tune-build")
        self._pending: dict[str, Future[None]] = {}
        # Prebuilds held until a measurement needs one (where builds never overlap a timing),
        # in the order asked; and the configs whose background build has ended.
        self._batched = not spec.overlap_builds
        self._deferred: dict[str, MeasureRequest] = {}
        self._ended: set[str] = set()

    def prebuild(self, request: MeasureRequest) -> None:
        config_hash = request.config.config_hash()
        if config_hash in self._ended or config_hash in self._pending:
            return
        if self._batched:
            self._deferred[config_hash] = request
        else:
            self._start(request, config_hash)

    def _start(self, request: MeasureRequest, config_hash: str) -> None:
        self._pending = {h: f for h, f in self._pending.items() if not f.done()}
        self._pending[config_hash] = self._builds.submit(self._build, request, config_hash)

    def _build(self, request: MeasureRequest, config_hash: str) -> None:
        def started() -> None:
            self.send(("background", "build", config_hash, time.monotonic()))
            self.hooks.plant("build", config_hash)

        try:
            self.runner.prebuild(request, started)
        finally:
            self._ended.add(config_hash)
        self.send(("background", "built", config_hash, time.monotonic()))

    def _start_batch(self, config_hash: str) -> None:
        """Start the deferred builds a measurement of ``config_hash`` needs: it and those asked
        after it, ``build_threads`` in all (it is built in the foreground when it was never
        prebuilt). Those asked before it and still deferred were given back: dropped."""
        asked = list(self._deferred)
        first = asked.index(config_hash) if config_hash in self._deferred else None
        batch = (asked[first:first + self._threads] if first is not None
                 else asked[:self._threads - 1])
        for dropped in asked[:first or 0]:
            del self._deferred[dropped]
        for h in batch:
            self._start(self._deferred.pop(h), h)

    def wait_for_build(self, request: MeasureRequest) -> None:
        """Before measuring a config built in the background, wait for that build (timed as the
        config's build step); a config not built yet starts the next batch first."""
        config_hash = request.config.config_hash()
        if (self._batched and config_hash not in self._pending
                and config_hash not in self._ended):
            self._start_batch(config_hash)
        pending = self._pending.pop(config_hash, None)
        if pending is not None:
            self.hooks.phase("build", config_hash)
            pending.result()

    def handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "prebuild":
            self.prebuild(MeasureRequest.from_dict(message[1]))
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            if kind == "measure":
                request = MeasureRequest.from_dict(message[1])
                self.wait_for_build(request)
                reply: tuple[Any, ...] = ("result", self.runner.measure(request).to_dict())
            elif kind == "compare":
                requests = [MeasureRequest.from_dict(d) for d in message[1]]
                results = self.runner.compare(requests, int(message[2]))
                reply = ("results", [r.to_dict() for r in results])
            else:
                raise ValueError(f"unknown message {kind!r}")
        for w in caught:
            self.send(("warning", str(w.message)))
        self.send(reply)


def _exit_with_parent(lifeline: int) -> None:
    # The supervisor holds the lifeline's write end and never writes: end-of-file means it died
    # (even by kill -9), and a device process hanging in a build must not go on at 100 % CPU then.
    os.read(lifeline, 1)
    os._exit(1)


def serve(conn: Connection, spec: DeviceProcessSpec, lifeline: int) -> None:
    """Start up, report ready, then handle messages until "stop" or the end of the pipe."""
    started = time.monotonic()
    # Ctrl-C in a terminal reaches the whole process group: the supervisor decides what a
    # SIGINT stops, and kills the device process when it must.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(lifeline,), daemon=True).start()
    lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with lock:  # the overlapped build's thread sends too
            conn.send(message)

    try:
        server = _DeviceServer(spec, send)
        send(("ready", time.monotonic() - started))
        while True:
            message = conn.recv()
            if message[0] == "stop":
                return
            server.handle(message)
    except EOFError:
        return  # the supervisor closed the pipe
    except Exception as exc:  # anything no config explains: report it, then exit
        send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))


def main() -> None:
    """The device process's entry: ``argv[1]`` the connection's fd, ``argv[2]`` the lifeline's;
    the first message on the connection is the DeviceProcessSpec."""
    conn = Connection(int(sys.argv[1]))
    spec = conn.recv()
    serve(conn, spec, int(sys.argv[2]))
