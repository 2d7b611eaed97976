"""The timing harness on the real device: rotation, call counts, statistics."""

from __future__ import annotations

import ctypes
from pathlib import Path

import dpctl.memory as dpm
import numpy as np
import pytest

import xe2tune  # noqa: F401  (runtime env before dpctl)
from xe2tune.harness import (
    BenchSettings,
    BufferRotation,
    TimingStats,
    bench,
    last_level_cache_bytes,
    open_queue,
)
from xe2tune.harness._bench import MAX_ROTATION_BYTES, MAX_ROTATION_SETS
from xe2tune.kernels import build_program

N = 4096


@pytest.fixture(scope="module")
def queue():
    return open_queue("opencl:cpu")


@pytest.fixture(scope="module")
def axpy(queue):
    return build_program(queue, "smoke_axpy.cpp", ["xe2t_axpy"], {"SCALE": 1}).kernels["xe2t_axpy"]


def _allocate(queue, x_host):
    def allocate(_i):
        x = dpm.MemoryUSMDevice(N * 4, queue=queue)
        y = dpm.MemoryUSMDevice(N * 4, queue=queue)
        queue.memcpy(x, x_host, N * 4)
        queue.memcpy(y, np.zeros(N, np.float32), N * 4)
        return x, y
    return allocate


def test_rotation_uses_every_set_round_robin_and_launch_counts_match(queue, axpy):
    x_host = np.random.default_rng(0).uniform(0.5, 1.5, N).astype(np.float32)
    rotation = BufferRotation(_allocate(queue, x_host), 4, 2 * N * 4)
    calls = []

    def launch(bufs):
        calls.append(bufs)
        x, y = bufs
        return [queue.submit(axpy, [y, x, ctypes.c_float(1.0), ctypes.c_int(N)], [N], [64])]

    settings = BenchSettings(warmup=3, iterations=10, n_buf=4, time_budget_s=5.0,
                             estimate_calls=2)
    stats = bench(launch, rotation, settings)
    # one priming call + estimates + warm-ups + timed repetitions
    assert len(calls) == 1 + 2 + 3 + 10
    assert stats.iterations == 10 and stats.warmup == 3 and stats.n_buf == 4
    assert len({id(c) for c in calls}) == 4
    assert len({c[1]._pointer for c in rotation.sets}) == 4
    for i, c in enumerate(calls):
        assert c is rotation.sets[i % 4]
    # each set's y accumulated x once per launch on that set: the launches really used it
    for index, (_, y) in enumerate(rotation.sets):
        out = np.empty(N, np.float32)
        queue.memcpy(out, y, N * 4)
        np.testing.assert_allclose(out, rotation.launches[index] * x_host, rtol=1e-5)
    assert sum(rotation.launches) == len(calls)
    assert all(s > 0 for s in stats.samples)


def test_time_budget_caps_iterations(queue, axpy):
    x_host = np.ones(N, np.float32)
    rotation = BufferRotation(_allocate(queue, x_host), 2, 2 * N * 4)

    def launch(bufs):
        x, y = bufs
        return [queue.submit(axpy, [y, x, ctypes.c_float(1.0), ctypes.c_int(N)], [N], [64])]

    stats = bench(launch, rotation, BenchSettings(warmup=20, iterations=1000, n_buf=2,
                                                  time_budget_s=1e-6))
    assert stats.iterations == 1 and stats.warmup == 1


def test_warns_when_rotated_set_fits_in_cache(queue):
    rotation = BufferRotation(lambda i: i, 4, 1024)
    with pytest.warns(UserWarning, match="smaller than the last-level cache"):
        assert rotation.warn_if_cache_resident(1 << 20)
    assert not rotation.warn_if_cache_resident(1024)


def test_rotation_grows_past_twice_the_cache_within_the_cap():
    assert len(BufferRotation(lambda i: i, 4, 1 << 20, cache_bytes=1 << 20).sets) == 4
    grown = BufferRotation(lambda i: i, 4, 16 << 20, cache_bytes=300 << 20)
    assert len(grown.sets) == 38 and grown.working_set_bytes >= 600 << 20
    assert not grown.warn_if_cache_resident(300 << 20)
    by_bytes = BufferRotation(lambda i: i, 4, 64 << 20, cache_bytes=4 << 30)
    assert by_bytes.working_set_bytes == MAX_ROTATION_BYTES
    by_count = BufferRotation(lambda i: i, 4, 1 << 20, cache_bytes=300 << 20)
    assert len(by_count.sets) == MAX_ROTATION_SETS
    with pytest.warns(UserWarning, match="smaller than the last-level cache"):
        assert by_count.warn_if_cache_resident(300 << 20)


def test_cpu_device_cache_is_the_hosts_last_level(queue):
    host = max(int(p.read_text().strip()[:-1]) * 1024
               for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"))
    assert last_level_cache_bytes(queue.sycl_device) == max(
        host, int(queue.sycl_device.global_mem_cache_size))


def test_statistics_on_known_samples():
    samples = [float(v) for v in range(1, 11)]  # 1..10 s
    s = TimingStats.from_samples(samples, warmup=2, n_buf=4, host_overhead_s=0.5)
    assert s.median == 5.5 and s.mean == 5.5 and s.min == 1 and s.max == 10
    assert s.p10 == pytest.approx(1.9) and s.p90 == pytest.approx(9.1)
    assert s.cv == pytest.approx(np.std(samples) / 5.5)
    assert s.iterations == 10 and s.summary()["host_overhead_s"] == 0.5


@pytest.mark.parametrize("bad", [dict(iterations=0), dict(iterations=1001), dict(n_buf=0),
                                 dict(warmup=-1), dict(time_budget_s=0)])
def test_bench_settings_reject_out_of_range(bad):
    with pytest.raises(ValueError):
        BenchSettings(**bad)
