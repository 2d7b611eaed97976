"""Consistency rules every stored trial obeys, whether the local tuner or a remote one made it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xe2tune.measurement import TrialStatus

if TYPE_CHECKING:
    from xe2tune.measurement import TrialResult


def _finite(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def trial_problems(result: TrialResult) -> list[str]:
    """Everything wrong with a trial result, as sentences; empty when it may be stored.

    The config is a ``LauncherConfig`` (checked when it was made or received) and the hash is
    derived from it; an OK trial must have been verified and timed, because only OK trials can
    become "best".
    """
    problems: list[str] = []
    for name in ("build_s", "verify_s", "bench_s"):
        value = getattr(result, name)
        if not _finite(value) or value < 0:
            problems.append(f"{name} must be a finite number >= 0, got {value!r}")
    if result.timing is not None:
        samples = result.timing.samples
        if not samples or not all(_finite(s) and s > 0 for s in samples):
            problems.append("timing samples must be finite and > 0 seconds")
        if result.timing.iterations != len(samples):
            problems.append(
                f"timing.iterations ({result.timing.iterations}) != number of samples "
                f"({len(samples)})"
            )
    if result.status is TrialStatus.OK:
        if result.timing is None:
            problems.append("an OK trial needs timing")
        if result.correctness is None or not result.correctness.passed:
            problems.append("an OK trial needs a passed correctness report")
    if result.roofline is not None and not _finite(result.roofline.achieved_flops):
        problems.append("roofline.achieved_flops must be finite")
    return problems
