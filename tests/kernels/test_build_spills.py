"""Spills as the device's own compiler reports them, and what a trial does with them.

A live Intel GPU's driver compiles every build with IGC and reports each kernel's spill bytes
(the SYCL kernel info ``spill_memory_size``); the trial runner then records the config as
``spills`` without spending device time on it. The CPU device reports nothing, and its builds
are timed as before.
"""

from __future__ import annotations

import pytest

from xe2tune.kernels import BuiltProgram, build_program


@pytest.mark.requires_xpu
def test_the_cpu_device_reports_no_spills(cpu_queue):
    built = build_program(cpu_queue, "smoke_axpy.cpp", ["xe2t_axpy"], {"SCALE": 2})
    assert built.spill_bytes == {} and built.spill_reason() is None


def test_a_build_that_spills_names_each_spilling_kernel():
    quiet = BuiltProgram({}, 0.0, False, "", {"split": 0, "combine": 0})
    assert quiet.spill_reason() is None
    spilled = BuiltProgram({}, 0.0, False, "", {"split": 1600, "combine": 0, "a": 64})
    assert spilled.spill_reason() == ("spills registers (the device compiler's allocation, "
                                      "not timed): a 64 B, split 1600 B")
