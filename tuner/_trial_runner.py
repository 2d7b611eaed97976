"""The TrialRunner protocol: where configs get built and measured.

The search loop only talks to this interface. :class:`SupervisedTrialRunner` builds and measures
in a device process per device, each step under a time limit, so a config that hangs or crashes
the device runtime fails alone; :class:`InProcessTrialRunner` measures in this process.
"""

from __future__ import annotations

import time
import warnings
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from xe2tune.errors import DeviceProcessError, TrialAbandoned
from xe2tune.harness import (
    ConfigRunner,
    DeviceProcess,
    DeviceProcessGone,
    DeviceProcessSpec,
    MeasureRequest,
    TrialLimits,
    TrialResult,
    TrialStatus,
    overlaps_builds,
)
from xe2tune.kernels import ProblemSpec


class TrialRunner(Protocol):
    """Builds and measures configs for the search loop.

    ``prebuild`` is called for the next candidate right before ``measure`` of the current one,
    so a runner can compile the next while the device measures the current (where the device
    is the host's CPU, never while a kernel is timed). ``prebuild``, ``measure``, ``compare``
    and ``close`` are called from the search thread only; ``abandon`` may also be called from a
    signal handler or another thread. Returned TrialResults are owned by the caller.
    """

    prebuild_depth: int  # how many trials the study loop keeps asked and prebuilt ahead

    def prebuild(self, request: MeasureRequest) -> None:
        """Start compiling ``request``'s config in the background, or do nothing.

        Raises:
            Nothing: build failures surface from ``measure``.
        """
        ...

    def measure(self, request: MeasureRequest) -> TrialResult:
        """Validate, build (or pick up the prebuilt program), verify and time one config.

        Raises:
            TrialAbandoned: if :meth:`abandon` was called meanwhile (record nothing).
            DeviceProcessError: if the runner's process failed in a way no config explains.
            Nothing else for failures of the config (they are the result's status).
        """
        ...

    def compare(self, requests: Sequence[MeasureRequest], rounds: int) -> list[TrialResult]:
        """Build and verify each config once, then time them side by side in ``rounds``
        alternating rounds in one process; one result per request, in order, each OK timing
        pooling all its rounds' samples (per-round medians in ``extra["compare"]``).

        Raises:
            ValueError: if ``rounds`` < 1.
            TrialAbandoned, DeviceProcessError: as :meth:`measure`.
        """
        ...

    def abandon(self) -> None:
        """Stop the ``measure``/``compare`` in progress as soon as possible and make it raise
        TrialAbandoned; safe from a signal handler or another thread.

        Raises:
            Nothing.
        """
        ...

    def close(self) -> None:
        """Finish or stop background work and release resources.

        Raises:
            Nothing.
        """
        ...


class InProcessTrialRunner:
    """Measures on this process's device queue; compiles the next candidate on a thread where
    the device is not the host's CPU.

    :meth:`abandon` cannot interrupt a build or a launch in this process: the pending call
    raises TrialAbandoned when its current step returns. No time limits apply.
    """

    prebuild_depth = 1  # one build thread: a second prebuild would wait behind the first

    def __init__(self, runner: ConfigRunner) -> None:
        self._runner = runner
        self._pool = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="xe2tune-build")
                      if overlaps_builds(runner.caps) else None)
        self._pending: dict[str, Future[None]] = {}  # by config hash
        self._abandoned = False

    def prebuild(self, request: MeasureRequest) -> None:
        if self._pool is not None:
            self._pending = {h: f for h, f in self._pending.items() if not f.done()}
            config_hash = request.config.config_hash()
            if config_hash not in self._pending:
                self._pending[config_hash] = self._pool.submit(self._runner.prebuild, request)

    def measure(self, request: MeasureRequest) -> TrialResult:
        self._abandoned = False
        # A config still compiling in the background is waited for, not compiled twice.
        pending = self._pending.pop(request.config.config_hash(), None)
        if pending is not None:
            pending.result()
        result = self._runner.measure(request)
        if self._abandoned:
            raise TrialAbandoned("the trial was abandoned")
        return result

    def compare(self, requests: Sequence[MeasureRequest], rounds: int) -> list[TrialResult]:
        self._abandoned = False
        results = self._runner.compare(requests, rounds)
        if self._abandoned:
            raise TrialAbandoned("the comparison was abandoned")
        return results

    def abandon(self) -> None:
        self._abandoned = True

    def wait_for_builds(self) -> None:
        """Block until the background builds (if any) are done."""
        for pending in self._pending.values():
            pending.result()
        self._pending = {}

    def close(self) -> None:
        self.wait_for_builds()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


@dataclass(frozen=True)
class PhaseMark:
    """A step the device process started: "build", "reference", "verify", "wait" (for
    background builds, before a timing), "time", "timed" (a timing ended), or
    "background build" / "background built" around a background build. ``t`` is the device
    process's ``time.monotonic()`` (one clock for all processes of the host)."""

    t: float
    phase: str
    config_hash: str


@dataclass(frozen=True)
class _Death:
    """The device process died or was killed during a config's step."""

    status: TrialStatus
    step: str | None
    config_hash: str | None
    error: str
    # Background builds were compiling when it died: any of them may have caused it.
    beside_builds: bool = False

    def result(self, request: MeasureRequest) -> TrialResult:
        return TrialResult(self.status, config=request.config, error=self.error,
                           extra={"failed_step": self.step})


class SupervisedTrialRunner:
    """Builds and measures in a device process on the device, each step under a time limit.

    The device process starts on first use (or :meth:`start`) and serves every trial after
    that, so its start-up is paid once per device; only a kill or a crash costs a fresh one. A
    build over ``limits.build_s`` becomes BUILD_TIMEOUT, a verification or timing over
    ``limits.run_s(problem, ...)`` RUN_TIMEOUT (the device process is killed in both cases), a
    device process death CRASH with its signal; the next call starts a fresh device process.

    :meth:`prebuild` compiles in the device process's background (``spec.build_threads`` at
    once, so :attr:`prebuild_depth` configs may be asked ahead); where the device is the host's
    CPU (``spec.overlap_builds`` False) no timing runs beside those builds (the device process
    waits for them first). A background build over ``limits.build_s`` is killed with the device
    process and its config's ``measure`` answers BUILD_TIMEOUT without building again; the call
    it interrupted runs again in a fresh device process, as does one whose device process died
    while background builds were compiling (once: a second death is its own).

    ``timeline`` keeps the latest steps the device processes reported, ``startups`` the seconds
    each device process took to become ready.
    """

    def __init__(self, spec: DeviceProcessSpec, limits: TrialLimits | None = None) -> None:
        self.spec = spec
        self.limits = limits or TrialLimits.from_env()
        self.timeline: deque[PhaseMark] = deque(maxlen=10_000)
        self.startups: list[float] = []
        self._process: DeviceProcess | None = None
        self._busy = False
        self._abandoned = False
        self._background: dict[str, float] = {}  # config hash -> start of its background build
        self._hung_builds: dict[str, _Death] = {}  # background builds killed over the limit

    @property
    def prebuild_depth(self) -> int:
        """How many configs the loop may keep asked and prebuilt ahead of the one measured:
        one per build thread of the device process."""
        return max(1, self.spec.build_threads)

    def start(self) -> None:
        """Start the device process now, so its start-up is not inside the first trial.

        Raises:
            DeviceProcessError: if it cannot start.
        """
        self._ready_process()

    def prebuild(self, request: MeasureRequest) -> None:
        if request.config.config_hash() in self._hung_builds:
            return
        try:
            self._ready_process().send(("prebuild", request.to_dict()))
        except (DeviceProcessGone, DeviceProcessError, TrialAbandoned):
            self._discard_process()  # the next measure starts a fresh one and builds there

    def measure(self, request: MeasureRequest) -> TrialResult:
        hung = self._hung_builds.pop(request.config.config_hash(), None)
        if hung is not None:
            return hung.result(request)
        retried = False
        while True:
            reply = self._call(("measure", request.to_dict()), [request])
            if not isinstance(reply, _Death):
                return TrialResult.from_dict(reply[1], request.config)
            if not self._blames_background(reply, [request], retried):
                return reply.result(request)
            retried = True

    def compare(self, requests: Sequence[MeasureRequest], rounds: int) -> list[TrialResult]:
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds}")
        results: list[TrialResult | None] = [None] * len(requests)
        remaining = list(range(len(requests)))
        retried = False
        while remaining:
            reply = self._call(("compare", [requests[i].to_dict() for i in remaining], rounds),
                               [requests[i] for i in remaining])
            if not isinstance(reply, _Death):
                for i, data in zip(remaining, reply[1], strict=True):
                    results[i] = TrialResult.from_dict(data, requests[i].config)
                break
            # The config whose step killed the device process fails alone; the others are compared
            # again, from the start, in a fresh device process.
            if self._blames_background(reply, [requests[i] for i in remaining], retried):
                retried = True
                continue
            culprit = next((i for i in remaining
                            if requests[i].config.config_hash() == reply.config_hash), None)
            if culprit is None:
                raise DeviceProcessError(f"the device process died outside any config's step: "
                                  f"{reply.error}")
            results[culprit] = reply.result(requests[culprit])
            remaining.remove(culprit)
        return [r for r in results if r is not None]

    def abandon(self) -> None:
        if self._busy:
            self._abandoned = True
        process = self._process
        if process is not None:
            process.kill()

    def close(self) -> None:
        if self._process is not None:
            self._process.close()
            self._process = None
        self._background.clear()

    def _blames_background(self, death: _Death, requests: Sequence[MeasureRequest],
                           retried: bool) -> bool:
        """Whether a death that interrupted ``requests`` is to be run again: a background
        build's own timeout (the death names another config: remembered for that config's
        ``measure``), or a death while background builds compiled (the first time only)."""
        ours = {r.config.config_hash() for r in requests}
        if death.config_hash is not None and death.config_hash not in ours:
            self._hung_builds[death.config_hash] = death
            return True
        return death.beside_builds and not retried

    def _ready_process(self) -> DeviceProcess:
        if self._process is not None and self._process.killed:  # abandoned while idle
            self._discard_process()
        if self._process is None:
            process = DeviceProcess(self.spec)
            self._process = process  # abandon() can kill it from here on
            try:
                process.wait_ready(self.limits.startup_s)
            except DeviceProcessGone:
                self._discard_process()
                self._raise_if_abandoned()
                raise DeviceProcessError("the device process was killed while starting") from None
            except DeviceProcessError:
                self._discard_process()
                raise
            assert process.startup_s is not None
            self.startups.append(process.startup_s)
        return self._process

    def _discard_process(self) -> None:
        process, self._process = self._process, None
        self._background.clear()
        if process is not None:
            process.kill()
            process.close(grace_s=5.0)

    def _raise_if_abandoned(self) -> None:
        if self._abandoned:
            self._discard_process()
            raise TrialAbandoned("the trial was abandoned")

    def _call(self, message: tuple[Any, ...],
              requests: Sequence[MeasureRequest]) -> tuple[Any, ...] | _Death:
        self._abandoned, self._busy = False, True
        try:
            for _attempt in range(2):
                process = self._ready_process()
                try:
                    process.send(message)
                    break
                except DeviceProcessGone:  # died idle (an overlapped build crashed): anew
                    self._raise_if_abandoned()
                    self._discard_process()
            else:
                raise DeviceProcessError("the device process died twice before it got a trial")
            try:
                return self._await(process, {r.config.config_hash(): r for r in requests})
            except BaseException:
                self._discard_process()  # interrupted mid-trial (Ctrl-C): never reuse it
                raise
        finally:
            self._busy = False

    def _await(self, process: DeviceProcess,
               requests: dict[str, MeasureRequest]) -> tuple[Any, ...] | _Death:
        """The device process's reply, timing each step it reports against that step's limit."""
        step: str | None = None
        config_hash: str | None = None
        # Until the first step starts (validation, planning) the least run limit applies.
        limit = self.limits.run_floor_s
        deadline = time.monotonic() + limit
        while True:
            # A background build is held to the build limit too, whatever the step.
            hung = min(self._background.items(), key=lambda item: item[1], default=None)
            hung_at = hung[1] + self.limits.build_s if hung else float("inf")
            try:
                reply = process.receive(min(deadline, hung_at))
            except DeviceProcessGone:
                self._raise_if_abandoned()
                how = process.exit_reason()
                beside = bool(self._background)
                self._discard_process()
                during = f"during the {step} step" if step else "before its first step"
                return _Death(TrialStatus.CRASH, step, config_hash,
                              f"crash: the device process died with {how} {during}"
                              + (" (background builds were compiling)" if beside else ""),
                              beside_builds=beside)
            if reply is None:
                self._discard_process()
                self._raise_if_abandoned()
                if hung is not None and hung_at < deadline:
                    return _Death(TrialStatus.BUILD_TIMEOUT, "build", hung[0],
                                  f"build_timeout: the background build took over its "
                                  f"{self.limits.build_s:.0f} s limit; the device process was "
                                  "killed")
                status = (TrialStatus.BUILD_TIMEOUT if step in ("build", "wait")
                          else TrialStatus.RUN_TIMEOUT)
                return _Death(status, step, config_hash,
                              f"{status.value}: the {step or 'first'} step took over its "
                              f"{limit:.0f} s limit; the device process was killed")
            kind = reply[0]
            if kind == "phase":
                _, name, marked, t = reply
                self.timeline.append(PhaseMark(t, name, marked))
                if (name, marked) != (step, config_hash):
                    step, config_hash = name, marked
                    limit = self._limit(name, requests[marked].problem)
                    deadline = t + limit
            elif kind == "background":
                _, event, marked, t = reply
                self.timeline.append(PhaseMark(t, f"background {event}", marked))
                if event == "build":
                    self._background[marked] = t
                else:
                    self._background.pop(marked, None)
            elif kind == "warning":
                warnings.warn(reply[1], stacklevel=2)
            elif kind == "error":
                self._discard_process()
                raise DeviceProcessError(f"the device process failed: {reply[1]}", reply[2])
            else:
                self._raise_if_abandoned()
                return reply

    def _limit(self, step: str, problem: ProblemSpec) -> float:
        if step in ("build", "wait"):  # waiting for background builds is waiting for a build
            return self.limits.build_s
        if step == "reference":
            return self.limits.reference_s(problem)
        return self.limits.run_s(problem, self.spec.peaks, self.spec.settings)
