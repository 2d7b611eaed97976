"""The ceilings' microkernels: every launch shape in one program, built before any is timed."""

from __future__ import annotations

import pytest

from xe2tune.harness._ceilings import (
    FMA_VARIANTS,
    _build_copy,
    _build_fma,
    _fma_variants,
    build_microkernels,
)


@pytest.mark.requires_xpu
def test_every_microkernel_the_ceilings_time_is_built_beforehand(cpu_queue) -> None:
    build_microkernels(cpu_queue, threads=2)
    # what measure_ceilings times afterwards comes from the in-process cache: no compile
    # runs between its timings
    fma = _build_fma(cpu_queue)
    assert fma.cached and _build_copy(cpu_queue).cached
    variants = _fma_variants(cpu_queue)
    assert variants == [v for v in FMA_VARIANTS if not v.gpu_only]  # the CPU device's shapes
    assert sorted(fma.kernels) == sorted(v.kernel_name(half) for half in (False, True)
                                         for v in variants)
