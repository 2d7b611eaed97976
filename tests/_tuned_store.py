"""Store a measured non-default config as the tuned best of a problem (for the tuned-lookup
tests of ``xe2tune.sdpa`` and the torch operator)."""

from __future__ import annotations

import dpctl

from xe2tune.cli._session import device_record
from xe2tune.db import open_store
from xe2tune.harness import BenchSettings, ConfigRunner, MeasureRequest, list_devices
from xe2tune.kernels import DeviceCaps, LauncherConfig, ProblemSpec, family_for
from xe2tune.measurement import TrialStatus
from xe2tune.testing import tune


def store_tuned(url: str, queue: dpctl.SyclQueue, caps: DeviceCaps,
                problem: ProblemSpec) -> LauncherConfig:
    """Measure a non-default valid config of ``problem`` and store it as a finished study."""
    family = family_for(problem, caps)
    default = family.default_config(problem, caps)
    tuned = next(c for c in family.valid_configs(problem, caps)
                 if c.shape_qk != default.shape_qk and c.stages == default.stages)
    runner = ConfigRunner(queue, caps, None, BenchSettings(warmup=1, iterations=3,
                                                           time_budget_s=0.2))
    result = runner.measure(MeasureRequest(family, problem, tuned))
    assert result.status is TrialStatus.OK, result.error
    listing = next(d for d in list_devices() if d.caps == caps)
    store = open_store(url)
    try:
        tune(store, problem, [result], device=device_record(listing, None), family=family.name,
             default_first=False)
    finally:
        store.close()
    return tuned
