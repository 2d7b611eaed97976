"""Device binaries kept on disk: a process's first build of a config loads the machine code an
earlier process's build left, and computes what that build computed.

Each test gets its own cache dir and an empty in-process build map, so every build below is
what a new process's first build of that config does (the SYCL runtime's own cache stays the
suite's: it only makes the compiles here cheaper).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from xe2tune.config import cache_dir, child_runtime_env
from xe2tune.harness import PlanExecutor
from xe2tune.kernels import (
    ProblemSpec,
    _jit,
    build_program,
    check_output,
    make_inputs,
    reference_sdpa,
)
from xe2tune.kernels._device_binaries import KeptBuild, binaries_kept
from xe2tune.kernels._registry import get_family

pytestmark = pytest.mark.requires_xpu

# Decode: two kernels (split and combine) in one program, GQA 32/8.
PROBLEM = ProblemSpec("decode", 128, "fp16", 1, 129, heads_q=32, heads_kv=8)


@pytest.fixture
def own_cache_dir(tmp_path):
    """A cache dir of this test's own but for the native extension and the precompiled SYCL
    preambles, the suite's (without them its first build compiles both anew, ~10 s)."""
    shared = cache_dir()
    for name in ("native", "sycl-preambles"):
        (shared / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / name).symlink_to(shared / name)
    return tmp_path


@pytest.fixture
def kept_dir(monkeypatch, own_cache_dir):
    """Where this test's binaries are kept; the in-process map starts empty."""
    monkeypatch.setenv("XE2TUNE_CACHE_DIR", str(own_cache_dir))
    monkeypatch.setattr(_jit, "_cache", {})
    return own_cache_dir / "device-binaries"


def _as_new_process(monkeypatch):
    monkeypatch.setattr(_jit, "_cache", {})


def _run(queue, built, plan):
    executor = PlanExecutor(queue, built, plan, PROBLEM)
    inputs = make_inputs(PROBLEM, seed=3)
    buffers = executor.allocate(*inputs)
    executor.launch_and_wait(buffers)
    out = executor.read_output(buffers)
    assert check_output(PROBLEM, out, reference_sdpa(PROBLEM, *inputs)).passed
    return out


def test_a_later_build_loads_the_kept_binary_and_computes_the_same(
        cpu_queue, cpu_caps, kept_dir, monkeypatch):
    family = get_family("sdpa_decode")
    plan = family.plan(family.default_config(PROBLEM, cpu_caps), PROBLEM, cpu_caps)
    first = build_program(cpu_queue, plan.source_file, plan.kernel_names, plan.defines)
    assert not first.loaded and len(list(kept_dir.iterdir())) == 1
    _as_new_process(monkeypatch)
    again = build_program(cpu_queue, plan.source_file, plan.kernel_names, plan.defines)
    assert again.loaded and not again.cached and again.log == first.log
    assert set(again.kernels) == set(plan.kernel_names)
    # The same machine code: the same bits out, on every kernel of the program.
    np.testing.assert_array_equal(_run(cpu_queue, again, plan),
                                  _run(cpu_queue, first, plan))


def _axpy(queue, scale):
    return build_program(queue, "smoke_axpy.cpp", ["xe2t_axpy"], {"SCALE": scale})


def test_a_binary_the_driver_refuses_is_built_anew_and_replaced(cpu_queue, kept_dir,
                                                                  monkeypatch):
    _axpy(cpu_queue, 3)
    (path,) = kept_dir.iterdir()
    kept = KeptBuild.from_bytes(path.read_bytes())
    assert kept is not None and kept.kernels.keys() == {"xe2t_axpy"}
    path.write_bytes(KeptBuild((b"not a program binary",), kept.kernels, kept.log,
                               kept.spill_bytes).to_bytes())
    _as_new_process(monkeypatch)
    assert not _axpy(cpu_queue, 3).loaded
    assert KeptBuild.from_bytes(path.read_bytes()) == kept
    _as_new_process(monkeypatch)
    assert _axpy(cpu_queue, 3).loaded


def test_each_config_is_kept_apart(cpu_queue, kept_dir, monkeypatch):
    _axpy(cpu_queue, 3)
    _axpy(cpu_queue, 4)
    assert len(list(kept_dir.iterdir())) == 2
    monkeypatch.setenv("CL_CONFIG_CPU_VECTORIZER_MODE", "7")  # another CPU back end setting
    _as_new_process(monkeypatch)
    assert not _axpy(cpu_queue, 3).loaded


@pytest.mark.parametrize("setting", [("SYCL_CACHE_PERSISTENT", "0"), ("SYCL_DUMP_IMAGES", "1")])
def test_nothing_is_kept_or_loaded_where_builds_are_wanted_anew(cpu_queue, kept_dir,
                                                                monkeypatch, setting, tmp_path):
    _axpy(cpu_queue, 5)
    monkeypatch.chdir(tmp_path)  # the runtime dumps images (SYCL_DUMP_IMAGES) into the cwd
    monkeypatch.setenv(*setting)
    assert not binaries_kept()
    _as_new_process(monkeypatch)
    assert not _axpy(cpu_queue, 5).loaded
    _as_new_process(monkeypatch)
    assert not _axpy(cpu_queue, 6).loaded
    assert len(list(kept_dir.iterdir())) == 1


@pytest.mark.parametrize("data", [b"", b"{}\n\x7fELF", b'{"format": 0}\nxx', b"no header"])
def test_an_entry_of_another_format_is_not_read(data):
    assert KeptBuild.from_bytes(data) is None


# Built in a process whose CPU runtime allows subgroup 16 (tests/_xmx_runner.py says why): the
# xmx decode's split and combine kernels land in two programs, each kept and loaded.
_TWO_PROGRAMS = """
import json, sys
import xe2tune
from xe2tune.harness import PlanExecutor, device_caps, open_queue
from xe2tune.kernels import ProblemSpec, build_program, make_inputs, _jit
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
queue = open_queue("opencl:cpu")
caps = device_caps(queue.sycl_device)
problem = ProblemSpec.from_dict(json.loads(sys.argv[1]))
family = XmxDecodeFamily()
plan = family.plan(family.default_config(problem, caps), problem, caps)
runs = []
for _ in range(2):
    _jit._cache.clear()
    built = build_program(queue, plan.source_file, plan.kernel_names, plan.defines)
    executor = PlanExecutor(queue, built, plan, problem)
    buffers = executor.allocate(*make_inputs(problem, seed=3))
    executor.launch_and_wait(buffers)
    runs.append({"loaded": built.loaded, "out": executor.read_output(buffers).tobytes().hex()})
print(json.dumps(runs))
"""


def test_a_build_split_into_two_programs_is_kept_and_loaded_whole(own_cache_dir):
    env = {**child_runtime_env("0"), "XE2TUNE_CACHE_DIR": str(own_cache_dir)}
    proc = subprocess.run([sys.executable, "-c", _TWO_PROGRAMS, json.dumps(PROBLEM.to_dict())],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, again = json.loads(proc.stdout)
    (entry,) = (own_cache_dir / "device-binaries").iterdir()
    kept = KeptBuild.from_bytes(entry.read_bytes())
    assert kept is not None and len(kept.binaries) == 2
    assert {i for i, _ in kept.kernels.values()} == {0, 1}
    assert not first["loaded"] and again["loaded"] and again["out"] == first["out"]
