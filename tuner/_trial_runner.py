"""The TrialRunner protocol: where configs get built and measured.

The search loop only talks to this interface, so builds and measurements can move into a
supervised worker process (a config can hang or crash the device runtime) without touching it.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from xe2tune.harness import TrialResult
from xe2tune.harness._runner import ConfigRunner, MeasureRequest


class TrialRunner(Protocol):
    """Builds and measures configs for the search loop.

    ``prebuild`` is called for the next candidate right before ``measure`` of the current one,
    so a runner can compile the next while the device measures the current. Both are called
    from the search thread only; the returned TrialResult is owned by the caller.
    """

    def prebuild(self, request: MeasureRequest) -> None:
        """Start compiling ``request``'s config in the background; never raises for the config.

        Raises:
            Nothing: build failures surface from ``measure``.
        """
        ...

    def measure(self, request: MeasureRequest) -> TrialResult:
        """Validate, build (or pick up the prebuilt program), verify and time one config.

        Raises:
            Nothing for failures of the config (they are the result's status); device or
            runtime failures propagate.
        """
        ...

    def close(self) -> None:
        """Finish background work and release resources.

        Raises:
            Nothing.
        """
        ...


class InProcessTrialRunner:
    """Measures on this process's device queue; compiles the next candidate on a thread.

    The SYCL build releases the GIL, so it proceeds while the main thread times a kernel (on a
    CPU device the two compete for cores; on a GPU they do not).
    """

    def __init__(self, runner: ConfigRunner) -> None:
        self._runner = runner
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xe2tune-build")
        self._pending: Future[None] | None = None

    def prebuild(self, request: MeasureRequest) -> None:
        self._pending = self._pool.submit(self._runner.prebuild, request)

    def measure(self, request: MeasureRequest) -> TrialResult:
        return self._runner.measure(request)

    def wait_for_builds(self) -> None:
        """Block until the background build (if any) is done."""
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def close(self) -> None:
        self.wait_for_builds()
        self._pool.shutdown(wait=True)
