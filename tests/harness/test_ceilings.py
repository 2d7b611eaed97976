"""The ceilings' microkernels are all built before the first of them is timed."""

from __future__ import annotations

import pytest

from xe2tune.harness._ceilings import _build_copy, _build_fma, _fma_variants, build_microkernels


@pytest.mark.requires_xpu
def test_every_microkernel_the_ceilings_time_is_built_beforehand(cpu_queue) -> None:
    build_microkernels(cpu_queue, threads=2)
    # what measure_ceilings times afterwards comes from the in-process cache: no compile
    # runs between its timings
    variants = _fma_variants(cpu_queue)
    assert variants and all(not v.gpu_only for v in variants)  # the CPU device's shapes
    assert all(_build_fma(cpu_queue, half, v).cached for half in (False, True) for v in variants)
    assert _build_copy(cpu_queue).cached
