"""Run a LaunchPlan on a dpctl queue: USM buffers in, NaN-poisoned output, events out.

The timing harness reuses the two halves separately: :meth:`PlanExecutor.allocate` builds one
buffer set per rotation slot, :meth:`PlanExecutor.launch` submits one run and returns its events.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass

import dpctl
import dpctl.memory as dpm
import numpy as np

from xe2tune.errors import InvalidProblem, LaunchResourceError
from xe2tune.kernels import BuiltProgram, LaunchPlan, ProblemSpec, numpy_dtype

_SCALAR_TYPES = {"int": ctypes.c_int32, "float": ctypes.c_float}


@dataclass(frozen=True)
class BufferSet:
    """Device memory of one run: q, k, v, o and the plan's scratch buffers, by name."""

    buffers: Mapping[str, dpm.MemoryUSMDevice]
    nbytes: int


def _to_bytes(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


class PlanExecutor:
    """Runs one built plan for one problem on one in-order queue.

    Not thread-safe: one executor per measuring thread. Buffer sets belong to the executor's
    queue and are freed when dropped.
    """

    def __init__(self, queue: dpctl.SyclQueue, built: BuiltProgram, plan: LaunchPlan,
                 problem: ProblemSpec) -> None:
        self.queue = queue
        self.plan = plan
        self.problem = problem
        self.dtype = numpy_dtype(problem.dtype)
        self._kernels = [built.kernels[launch.kernel] for launch in plan.launches]
        p = problem
        self.shapes = {
            "q": (p.batch, p.q_len, p.heads_q, p.head_dim),
            "k": (p.batch, p.kv_len, p.heads_kv, p.head_dim),
            "v": (p.batch, p.kv_len, p.heads_kv, p.head_dim_v),
            "o": (p.batch, p.q_len, p.heads_q, p.head_dim_v),
        }
        kv_dtype = numpy_dtype(p.kv_element_dtype)
        self.dtypes = {"q": self.dtype, "k": kv_dtype, "v": kv_dtype, "o": self.dtype}
        if p.kv_dtype is not None:
            self.shapes["kv_scale"] = (2, p.heads_kv)
            self.dtypes["kv_scale"] = np.dtype(np.float32)
        self._bytes = {name: self.dtypes[name].itemsize * int(np.prod(s))
                       for name, s in self.shapes.items()}
        self._bytes.update(plan.scratch)
        self._poison = _to_bytes(np.full(self.shapes["o"], np.nan, dtype=self.dtype))

    @property
    def buffer_set_bytes(self) -> int:
        """Bytes of device memory one buffer set occupies."""
        return sum(self._bytes.values())

    def allocate(self, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                 kv_scale: np.ndarray | None = None) -> BufferSet:
        """Device buffers holding copies of q, k, v (and for FP8 K/V, kv_scale [2, heads_kv]
        float32), and NaN-poisoned o and scratch.

        Raises:
            InvalidProblem: if an input's shape or dtype differs from the problem's, or
                kv_scale is missing for FP8 K/V or given without them.
        """
        if (kv_scale is None) != (self.problem.kv_dtype is None):
            raise InvalidProblem(
                "kv_scale [2, heads_kv] float32 goes with FP8 K/V (kv_dtype e4m3 or e5m2) and "
                f"only with them; the problem's kv_dtype is {self.problem.kv_dtype}")
        buffers = {name: dpm.MemoryUSMDevice(max(1, n), queue=self.queue)
                   for name, n in self._bytes.items()}
        inputs = (("q", q), ("k", k), ("v", v))
        if kv_scale is not None:
            inputs += (("kv_scale", kv_scale),)
        for name, array in inputs:
            if array.shape != self.shapes[name] or array.dtype != self.dtypes[name]:
                raise InvalidProblem(
                    f"{name} is {array.shape} {array.dtype}, the problem needs "
                    f"{self.shapes[name]} {self.dtypes[name]}"
                )
            buffers[name].copy_from_host(_to_bytes(array))
        for name in self.plan.scratch:
            buffers[name].memset(0xFF)  # all-ones bytes are a float NaN: unwritten partials show
        buffer_set = BufferSet(buffers, self.buffer_set_bytes)
        self.poison_output(buffer_set)
        return buffer_set

    def poison_output(self, buffer_set: BufferSet) -> None:
        """Fill o with NaN so any element the kernels do not write fails the check."""
        buffer_set.buffers["o"].copy_from_host(self._poison)

    def launch(self, buffer_set: BufferSet) -> list[dpctl.SyclEvent]:
        """Submit the plan's launches in order; returns their events (not waited for).

        Raises:
            LaunchResourceError: if the device refuses a launch.
        """
        events = []
        for kernel, launch in zip(self._kernels, self.plan.launches, strict=True):
            args = [
                buffer_set.buffers[a] if kind == "buffer" else _SCALAR_TYPES[kind](a)
                for a, kind in zip(launch.args, launch.arg_types, strict=True)
            ]
            try:
                events.append(self.queue.submit(
                    kernel, args, list(launch.global_size), list(launch.local_size)
                ))
            except dpctl.SyclKernelSubmitError as exc:
                raise LaunchResourceError(
                    f"launching {launch.kernel} over {launch.global_size}/{launch.local_size} "
                    f"failed: {exc}"
                ) from exc
        return events

    def launch_and_wait(self, buffer_set: BufferSet) -> list[dpctl.SyclEvent]:
        """:meth:`launch`, then wait for the last event."""
        events = self.launch(buffer_set)
        if events:
            events[-1].wait()
        return events

    def read_output(self, buffer_set: BufferSet) -> np.ndarray:
        """o copied to the host, in the problem's dtype and layout."""
        out = np.empty(self.shapes["o"], dtype=self.dtype)
        buffer_set.buffers["o"].copy_to_host(out.reshape(-1).view(np.uint8))
        return out
