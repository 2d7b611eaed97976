"""Measured ceilings: an FMA microkernel and a streaming copy, timed by the same harness.

Each microkernel runs in a few launch shapes and the fastest launch of the fastest shape wins: a
ceiling is what the device can be made to do, so neither a poorly shaped variant nor a launch
slowed by another process may lower it (kernels are still ranked by their median).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import dpctl
import dpctl.memory as dpm

from xe2tune.harness._bench import BenchSettings, BufferRotation, bench
from xe2tune.harness._peaks import DevicePeaks
from xe2tune.kernels import BuiltProgram, build_program


@dataclass(frozen=True)
class FmaVariant:
    """One launch shape of the FMA microkernel (``kernels/ceiling_fma.cpp`` has a kernel of
    each shape's vec, chains and iters per compute type)."""

    vec: int
    chains: int
    global_size: int
    local_size: int
    iters: int
    gpu_only: bool = False  # a million scalar work-items: minutes of fp16 emulation on a CPU

    def kernel_name(self, half: bool) -> str:
        return (f"xe2t_ceiling_fma_{'fp16' if half else 'fp32'}_v{self.vec}_c{self.chains}"
                f"_i{self.iters}")


# With the CPU runtime's implicit vectorizer off (config.py), explicit vectors carry the SIMD
# width, and FMA latency x ports independent chains are needed to fill the FMA pipes: vec 8 with
# 12 chains reached 97 GFLOP/s fp32 on 2 EPYC vCPUs (AVX2; vec 4: 47); on 2 AVX-512 Xeon vCPUs
# vec 16 with 12 chains reached 352 (vec 8 x 12: 170, vec 16 x 4: 190). GPUs vectorize across
# work-items instead, so the scalar variant with many work-items is theirs.
FMA_VARIANTS = (
    FmaVariant(vec=8, chains=12, global_size=64, local_size=4, iters=20_000),
    FmaVariant(vec=16, chains=4, global_size=64, local_size=4, iters=20_000),
    FmaVariant(vec=16, chains=12, global_size=64, local_size=4, iters=10_000),
    FmaVariant(vec=8, chains=12, global_size=256, local_size=16, iters=10_000),
    FmaVariant(vec=1, chains=8, global_size=1 << 20, local_size=256, iters=200, gpu_only=True),
)
COPY_BYTES = 64 << 20
COPY_VEC = 8
COPY_SHAPES = ((2048, 64), (1 << 20, 256))
BUILD_THREADS = 2  # the microkernels' builds at once, before any of them is timed


@dataclass(frozen=True)
class Ceilings:
    """FMA FLOP/s per compute type and copy bandwidth, as measured."""

    fma_fp32: float
    fma_fp16: float
    copy_bandwidth: float

    def peaks(self, llc_bytes: int) -> DevicePeaks:
        # Kernels may compute fp16 inputs in fp32 (all ours do on the CPU, where fp16 FMA is
        # emulated), so the fp16 roof is the faster of the two; bf16 always computes in fp32.
        return DevicePeaks(
            flops={
                "fp32": self.fma_fp32,
                "fp16": max(self.fma_fp16, self.fma_fp32),
                "bf16": self.fma_fp32,
            },
            bandwidth=self.copy_bandwidth,
            source="measured",
            llc_bytes=llc_bytes,
        )


def _fma_variants(queue: dpctl.SyclQueue) -> list[FmaVariant]:
    return [v for v in FMA_VARIANTS if queue.sycl_device.is_gpu or not v.gpu_only]


def _build_fma(queue: dpctl.SyclQueue) -> BuiltProgram:
    """Every FMA shape of the device in both compute types: one program."""
    names = [v.kernel_name(half) for half in (False, True) for v in _fma_variants(queue)]
    return build_program(queue, "ceiling_fma.cpp", names, {})


def _build_copy(queue: dpctl.SyclQueue) -> BuiltProgram:
    return build_program(queue, "ceiling_copy.cpp", ["xe2t_ceiling_copy"], {"VEC": COPY_VEC})


def build_microkernels(queue: dpctl.SyclQueue, threads: int = BUILD_THREADS) -> None:
    """Compile the ceilings' two programs (FMA, copy), ``threads`` at a time; nothing is timed
    meanwhile (the ceilings time them afterwards, from the in-process cache).

    Raises:
        KernelCompileError: if a microkernel fails to build on this device.
    """
    with ThreadPoolExecutor(max(1, threads), "xe2tune-ceiling-build") as pool:
        for build in [pool.submit(_build_fma, queue), pool.submit(_build_copy, queue)]:
            build.result()


def _fma_flops(queue: dpctl.SyclQueue, half: bool, settings: BenchSettings,
               variants: Sequence[FmaVariant]) -> dict[FmaVariant, float]:
    """FLOP/s of each variant's fastest launch."""
    flops = {}
    for v in variants:
        kernel = _build_fma(queue).kernels[v.kernel_name(half)]
        seed = ctypes.c_uint16(0x3C00) if half else ctypes.c_float(1.0)
        rotation = BufferRotation(
            lambda _i, n=v.global_size: dpm.MemoryUSMDevice(n * 4, queue=queue),
            settings.n_buf, v.global_size * 4,
        )
        stats = bench(
            lambda out, v=v, kernel=kernel, seed=seed: [
                queue.submit(kernel, [out, seed], [v.global_size], [v.local_size])
            ],
            rotation, settings,
        )
        flops[v] = v.global_size * v.iters * v.chains * v.vec * 2.0 / stats.min
    return flops


CEILING_SETTINGS = BenchSettings(warmup=5, iterations=30, time_budget_s=1.0)
"""How the ceilings are timed unless a caller says otherwise."""
# A ceiling measured while another process held the cores would let kernels exceed it (seen on
# a shared VM: one measurement of 243 GFLOP/s among 327-354, and a prefill at 268): passes
# spread over the measurement give the load time to leave.
CEILING_PASSES = 3
# Later passes time again only the shapes within this fraction of the best so far: a load can
# halve a pass, not make a shape several times slower win (the CPU device's (2048, 64) copy
# moves a fifth of what (1M, 256) does: 0.74 of each pass's 0.9 s, measured on the EPYC).
RETIME_WITHIN = 0.5


def measure_copy_bandwidth(queue: dpctl.SyclQueue, settings: BenchSettings,
                           llc_bytes: int = 0) -> float:
    """Bytes read + written per second by the streaming copy, best over its launch shapes,
    over buffer sets spanning at least twice ``llc_bytes``."""
    rotation = _copy_buffers(queue, settings, llc_bytes)
    return max(_copy_bandwidths(queue, rotation, settings, COPY_SHAPES).values())


CopyBuffers = BufferRotation[tuple[dpm.MemoryUSMDevice, dpm.MemoryUSMDevice]]


def _copy_buffers(queue: dpctl.SyclQueue, settings: BenchSettings,
                  llc_bytes: int) -> CopyBuffers:
    """The copy's (destination, source) sets, spanning at least twice ``llc_bytes``."""
    def allocate(_i: int) -> tuple[dpm.MemoryUSMDevice, dpm.MemoryUSMDevice]:
        src = dpm.MemoryUSMDevice(COPY_BYTES, queue=queue)
        src.memset(1)
        return dpm.MemoryUSMDevice(COPY_BYTES, queue=queue), src

    return BufferRotation(allocate, settings.n_buf, 2 * COPY_BYTES, llc_bytes)


def _copy_bandwidths(queue: dpctl.SyclQueue, rotation: CopyBuffers, settings: BenchSettings,
                     shapes: Sequence[tuple[int, int]]) -> dict[tuple[int, int], float]:
    """Bandwidth of each (global, local) launch shape's fastest launch."""
    kernel = _build_copy(queue).kernels["xe2t_ceiling_copy"]
    n_vec = COPY_BYTES // 4 // COPY_VEC
    bandwidths = {}
    for global_size, local_size in shapes:
        stats = bench(
            lambda bufs, g=global_size, lo=local_size: [
                queue.submit(kernel, [bufs[0], bufs[1], ctypes.c_long(n_vec)], [g], [lo])
            ],
            rotation, settings,
        )
        bandwidths[(global_size, local_size)] = 2.0 * COPY_BYTES / stats.min
    return bandwidths


Shape = TypeVar("Shape")


def _retimed(best: dict[Shape, float], every: Sequence[Shape]) -> list[Shape]:
    """The shapes a pass times: all in the first (``best`` empty), then those within
    RETIME_WITHIN of the best so far."""
    if not best:
        return list(every)
    top = max(best.values())
    return [shape for shape in every if best[shape] >= RETIME_WITHIN * top]


def _best_of(best: dict[Shape, float], new: dict[Shape, float]) -> dict[Shape, float]:
    return {**best, **{shape: max(best.get(shape, 0.0), x) for shape, x in new.items()}}


def measure_ceilings(queue: dpctl.SyclQueue, settings: BenchSettings | None = None,
                     llc_bytes: int = 0) -> Ceilings:
    """Run both microkernels on the queue's device (the copy over sets spanning at least twice
    ``llc_bytes``), CEILING_PASSES times each, interleaved; the best pass of each is the ceiling
    (fp16's FMA once only when it is under a quarter of fp32's: it is no roof then). The first
    pass times every launch shape, later ones those within RETIME_WITHIN of the best.
    Every microkernel is built first (:func:`build_microkernels`), so no build runs beside a
    timing.

    Raises:
        KernelCompileError: if a microkernel fails to build on this device.
    """
    settings = settings or CEILING_SETTINGS
    build_microkernels(queue)
    variants = _fma_variants(queue)
    fp32: dict[FmaVariant, float] = {}
    fp16: dict[FmaVariant, float] = {}
    copy: dict[tuple[int, int], float] = {}
    # one set of copy buffers for every pass: a new one would first fault in its pages
    copy_buffers = _copy_buffers(queue, settings, llc_bytes)
    for n in range(CEILING_PASSES):
        fp32 = _best_of(fp32, _fma_flops(queue, False, settings, _retimed(fp32, variants)))
        # fp16 far below fp32 is emulated (the CPU device: a sixth to a tenth of it) and no
        # roof, the fp16 peak being the faster of the two. Loaded passes were seen at half the
        # best (fp32 118 vs 236 GFLOP/s at load 7 on 2 cores), not a quarter, so later passes
        # cannot lift it past fp32; its slow launches took a quarter to a half of the timing.
        if n == 0 or max(fp16.values()) >= max(fp32.values()) / 4:
            fp16 = _best_of(fp16, _fma_flops(queue, True, settings, _retimed(fp16, variants)))
        copy = _best_of(copy, _copy_bandwidths(queue, copy_buffers, settings,
                                               _retimed(copy, COPY_SHAPES)))
    return Ceilings(fma_fp32=max(fp32.values()), fma_fp16=max(fp16.values()),
                    copy_bandwidth=max(copy.values()))
