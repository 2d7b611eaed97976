"""The ceilings' microkernels: every launch shape in one program, built before any is timed,
and which shapes each pass of the measurement times."""

from __future__ import annotations

import pytest

from xe2tune.harness._ceilings import (
    FMA_VARIANTS,
    _best_of,
    _build_copy,
    _build_fma,
    _fma_variants,
    _retimed,
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


def test_later_passes_time_again_only_the_shapes_a_load_could_have_hidden() -> None:
    shapes = [(2048, 64), (1 << 20, 256), (4096, 128)]
    assert _retimed({}, shapes) == shapes  # the first pass times every shape
    best = _best_of({}, {(2048, 64): 7.4, (1 << 20, 256): 36.0, (4096, 128): 20.0})
    assert _retimed(best, shapes) == [(1 << 20, 256), (4096, 128)]
    # a pass keeps each shape's best, including the shapes it did not time
    best = _best_of(best, {(1 << 20, 256): 30.0, (4096, 128): 25.0})
    assert best == {(2048, 64): 7.4, (1 << 20, 256): 36.0, (4096, 128): 25.0}
