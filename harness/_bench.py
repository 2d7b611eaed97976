"""The timing protocol: cache-busting buffer rotation, warm-up, budgeted repetitions.

Follows seed 002's methodology (N_BUF = 4 rotated buffer sets, 20 warm-ups, 100 to 1000
iterations) and Triton's do_bench shape (a priming call, an estimate from a few calls, time
budgets turned into counts with ``max(1, ...)``, one device timestamp pair per repetition, all
samples returned).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import dpctl

from xe2tune.errors import BenchTimeout
from xe2tune.measurement import TimingStats

T = TypeVar("T")

MAX_ITERATIONS = 1000
# Rotated sets are added until they span twice the last-level cache, up to this many bytes and
# sets (every set is its own allocations and input copies; smaller problems stay cache-resident
# and say so).
MAX_ROTATION_BYTES = 2 << 30
MAX_ROTATION_SETS = 64


@dataclass(frozen=True)
class BenchSettings:
    """How long and how often to measure one config."""

    warmup: int = 20
    iterations: int = 100
    n_buf: int = 4
    time_budget_s: float = 2.0  # for the timed repetitions; warm-up gets half of it
    estimate_calls: int = 3
    launch_timeout_s: float = 60.0  # one launch slower than this is not worth measuring

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if not 1 <= self.iterations <= MAX_ITERATIONS:
            raise ValueError(f"iterations must be in 1..{MAX_ITERATIONS}, got {self.iterations}")
        if self.n_buf < 1:
            raise ValueError(f"n_buf must be >= 1, got {self.n_buf}")
        if self.time_budget_s <= 0:
            raise ValueError(f"time budget must be positive, got {self.time_budget_s}")


class BufferRotation(Generic[T]):
    """At least ``n_buf`` independent buffer sets handed out round-robin, one per launch.

    Rotating means no launch reads what the previous one just left in cache, as long as the
    rotated working set exceeds the last-level cache: given ``cache_bytes``, sets are added
    until they span twice that (a server CPU's L3 holds hundreds of MiB, far more than 4 sets
    of a decode problem), within MAX_ROTATION_BYTES and MAX_ROTATION_SETS;
    :meth:`warn_if_cache_resident` says when they still do not.
    """

    def __init__(self, allocate: Callable[[int], T], n_buf: int, set_bytes: int,
                 cache_bytes: int = 0) -> None:
        if set_bytes > 0 and cache_bytes > 0:
            wanted = math.ceil(2 * cache_bytes / set_bytes)
            n_buf = max(n_buf, min(wanted, MAX_ROTATION_SETS, MAX_ROTATION_BYTES // set_bytes))
        self.sets: list[T] = [allocate(i) for i in range(n_buf)]
        self.set_bytes = set_bytes
        self.launches = [0] * n_buf
        self._next = 0

    def take(self) -> T:
        """The next buffer set in rotation."""
        index = self._next
        self._next = (index + 1) % len(self.sets)
        self.launches[index] += 1
        return self.sets[index]

    @property
    def working_set_bytes(self) -> int:
        return self.set_bytes * len(self.sets)

    def warn_if_cache_resident(self, llc_bytes: int) -> bool:
        """Warn (and return True) when the rotated sets fit in the last-level cache."""
        if llc_bytes and self.working_set_bytes < llc_bytes:
            warnings.warn(
                f"rotated working set {self.working_set_bytes / 2**20:.1f} MiB is smaller than "
                f"the last-level cache ({llc_bytes / 2**20:.1f} MiB): timings include cache hits",
                stacklevel=2,
            )
            return True
        return False


def device_seconds(events: Sequence[dpctl.SyclEvent]) -> float:
    """Device time of one run: a plan may be several kernels (split-KV decode, pack + attention),
    so from the first start to the last end."""
    return (events[-1].profiling_info_end - events[0].profiling_info_start) * 1e-9


def _run(launch: Callable[[T], Sequence[dpctl.SyclEvent]], rotation: BufferRotation[T],
         count: int) -> list[list[dpctl.SyclEvent]]:
    runs = [list(launch(rotation.take())) for _ in range(count)]
    if runs:
        runs[-1][-1].wait()
    return runs


def bench(
    launch: Callable[[T], Sequence[dpctl.SyclEvent]],
    rotation: BufferRotation[T],
    settings: BenchSettings,
) -> TimingStats:
    """Time ``launch`` over the rotation; every repetition timed by device profiling.

    ``launch(buffer_set)`` submits one run of the kernel(s) on an in-order profiling queue and
    returns its events. Calls made: 1 priming + ``estimate_calls`` + warm-ups + repetitions.

    Raises:
        BenchTimeout: if the priming call alone exceeds ``launch_timeout_s``.
    """
    started = time.perf_counter()
    _run(launch, rotation, 1)
    prime_s = time.perf_counter() - started
    if prime_s > settings.launch_timeout_s:
        raise BenchTimeout(
            f"one launch took {prime_s:.1f} s, over the {settings.launch_timeout_s} s limit"
        )
    estimate_runs = _run(launch, rotation, settings.estimate_calls)
    estimate = max(min(device_seconds(r) for r in estimate_runs), 1e-9)
    warmup = min(settings.warmup, max(1, math.floor(0.5 * settings.time_budget_s / estimate)))
    _run(launch, rotation, warmup)
    iterations = min(settings.iterations, max(1, math.floor(settings.time_budget_s / estimate)))
    wall_start = time.perf_counter()
    timed = _run(launch, rotation, iterations)
    wall = time.perf_counter() - wall_start
    samples = [device_seconds(r) for r in timed]
    host_overhead = max(0.0, wall / iterations - sum(samples) / iterations)
    return TimingStats.from_samples(
        samples, warmup=warmup, n_buf=len(rotation.sets), host_overhead_s=host_overhead
    )
