"""Run the SDPA kernels on torch tensors, in their own memory whenever the layout allows.

The kernels index q, k, v and o as contiguous [batch, seq, heads, D]. A torch tensor in
[batch, heads, seq, D] whose ``transpose(1, 2)`` is contiguous (the usual view of a projection
reshaped to [b, s, h, d] and transposed) is exactly that memory: its data pointer goes to the
kernel as it is. On the opencl:cpu device that pointer is plain host memory from torch's
allocator, valid in a kernel because the device has ``usm_system_allocations`` (dpctl.memory
refuses to wrap it, hence :func:`submit_at_addresses`). Any other layout is copied once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache

import dpctl
import dpctl.memory as dpm
import torch

from xe2tune._tuned import ConfigChoice, choose_launcher
from xe2tune.errors import InvalidProblem, LaunchResourceError
from xe2tune.harness import device_caps, open_queue
from xe2tune.kernels import (
    BuiltProgram,
    LauncherConfig,
    LaunchPlan,
    ProblemSpec,
    build_program,
    get_family,
    submit_at_addresses,
)

# Every kernel was verified on USM allocations, which start 64-byte aligned (as torch's CPU
# allocator aligns storages); a view starting elsewhere (a slice mid-row) is copied.
ALIGNMENT = 64
DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
# FP8 K/V (with float16/bfloat16 queries), dequantized by a scale per tensor or per KV head.
KV_DTYPES = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}
CPU_DEVICE = "opencl:cpu"


@dataclass(frozen=True)
class Piece:
    """One launch of a call: the query rows and keys it covers, and its mask."""

    rows: slice
    keys: slice
    causal: bool


def pieces(q_len: int, kv_len: int, causal: bool) -> tuple[Piece, ...]:
    """torch's causal mask as launches of the kernels' mask.

    torch aligns ``is_causal`` top-left (query i sees keys 0 .. i), the kernels bottom-right
    (query i sees keys 0 .. i + kv_len - q_len); the two agree when q_len == kv_len. With fewer
    queries than keys no query sees past key q_len - 1, so the first q_len keys are a square
    problem. With more, the first kv_len rows are a square causal problem and every later row
    sees every key.
    """
    everything = slice(None)
    if not causal or q_len == kv_len:
        return (Piece(everything, everything, causal),)
    if q_len < kv_len:
        return (Piece(everything, slice(0, q_len), True),)
    return (Piece(slice(0, kv_len), everything, True),
            Piece(slice(kv_len, None), everything, False))


def piece_problem(shape_q: tuple[int, ...], shape_k: tuple[int, ...], dtype: str,
                  piece: Piece, head_dim_v: int, kv_dtype: str | None) -> ProblemSpec:
    """The kernels' problem for one piece of [b, s, h, d] q and k (v with ``head_dim_v``
    columns, K/V in ``kv_dtype``: None for q's dtype, else an FP8 format).

    Raises:
        InvalidProblem: for shapes, dtypes or head dims the kernels do not support.
    """
    batch, q_len, heads_q, head_dim = shape_q
    rows = len(range(q_len)[piece.rows])
    keys = len(range(shape_k[1])[piece.keys])
    return ProblemSpec(mode=ProblemSpec.choose_mode(rows), head_dim=head_dim, dtype=dtype,
                       q_len=rows, kv_len=keys, heads_q=heads_q, heads_kv=shape_k[2],
                       batch=batch, causal=piece.causal, head_dim_v=head_dim_v,
                       kv_dtype=kv_dtype)


@cache
def cpu_queue() -> dpctl.SyclQueue:
    """The queue CPU tensors run on (resolved once: resolving lists every device).

    Raises:
        InvalidProblem: if the CPU device cannot run kernels on host memory.
    """
    queue = open_queue(CPU_DEVICE)
    if not queue.sycl_device.has_aspect_usm_system_allocations:
        raise InvalidProblem(f"{CPU_DEVICE} lacks usm_system_allocations: kernels there cannot "
                             "read torch's CPU memory")
    return queue


def encode_config(config: ConfigChoice) -> str | None:
    """``config`` as the operator carries it: None, "default", or a config's JSON."""
    if config is None or isinstance(config, str):
        return config
    if isinstance(config, LauncherConfig):
        return json.dumps(config.to_dict(), sort_keys=True)
    return json.dumps(dict(config), sort_keys=True)


def _decode_config(text: str | None) -> ConfigChoice:
    return text if text is None or text == "default" else json.loads(text)


@lru_cache(maxsize=512)
def prepared(problem: ProblemSpec, config: str | None,
             scale: float | None) -> tuple[LaunchPlan, BuiltProgram]:
    """The plan and kernels of a problem on the CPU device: the tuned config looked up, the
    program built, once per (problem, config, scale) per process. ``config`` as
    :func:`encode_config` gives it.

    Raises:
        InvalidProblem, InvalidConfig, KernelCompileError: as ``xe2tune.sdpa``.
    """
    queue = cpu_queue()
    caps = device_caps(queue.sycl_device)
    launcher = choose_launcher(problem, caps, _decode_config(config))
    plan = get_family(launcher.family).plan(launcher, problem, caps, scale=scale)
    return plan, build_program(queue, plan.source_file, plan.kernel_names, plan.defines)


def zero_copy(view: torch.Tensor) -> bool:
    """Whether a [b, s, h, d] view can go to a kernel as it is."""
    return view.is_contiguous() and view.data_ptr() % ALIGNMENT == 0


def kernel_operand(view: torch.Tensor) -> torch.Tensor:
    """A [b, s, h, d] view as the kernels read it: itself, or a contiguous aligned copy."""
    return view if zero_copy(view) else view.clone(memory_format=torch.contiguous_format)


def _launch(problem: ProblemSpec, config: str | None, scale: float | None,
            tensors: dict[str, torch.Tensor]) -> None:
    plan, built = prepared(problem, config, scale)
    queue = cpu_queue()
    scratch = {name: dpm.MemoryUSMDevice(max(1, n), queue=queue)
               for name, n in plan.scratch.items()}
    addresses = {name: t.data_ptr() for name, t in tensors.items()}
    addresses.update({name: m.__sycl_usm_array_interface__["data"][0]
                      for name, m in scratch.items()})
    event = None
    for launch in plan.launches:
        args = [("ptr", addresses[a]) if kind == "buffer" else (kind, a)
                for a, kind in zip(launch.args, launch.arg_types, strict=True)]
        try:
            event = submit_at_addresses(queue, built.kernels[launch.kernel], args,
                                        launch.global_size, launch.local_size)
        except RuntimeError as exc:  # the SYCL exception, as the extension raises it
            raise LaunchResourceError(
                f"launching {launch.kernel} over {launch.global_size}/{launch.local_size} "
                f"failed: {exc}") from exc
    if event is not None:
        event.wait()  # the scratch buffers and the caller's tensors must outlive the kernels


def attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, causal: bool,
           scale: float | None, config: str | None,
           kv_scale: torch.Tensor | None = None) -> torch.Tensor:
    """SDPA of CPU tensors in torch's [b, h, s, d] layout, causal aligned top-left as torch does.

    Value may have its own head dim Dv; FP8 key/value come with ``kv_scale`` [2, heads_kv]
    float32 (K's then V's scale per KV head). Returns [b, h, q_len, Dv] viewing [b, q_len, h, Dv]
    storage (the kernels' layout), as torch's flash-attention backends return it. ``config`` as
    :func:`encode_config` gives it.

    Raises:
        InvalidProblem, InvalidConfig, KernelCompileError, LaunchResourceError.
    """
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    batch, q_len, heads_q, _ = q.shape
    out = torch.empty((batch, q_len, heads_q, v.shape[-1]), dtype=q.dtype, device=q.device)
    extra = {} if kv_scale is None else {"kv_scale": kernel_operand(kv_scale)}
    for piece in pieces(q_len, k.shape[1], causal):
        problem = piece_problem(tuple(q.shape), tuple(k.shape), DTYPES[q.dtype], piece,
                                v.shape[-1], KV_DTYPES.get(k.dtype))
        o = out[:, piece.rows]
        o_kernel = o if zero_copy(o) else torch.empty_like(o, memory_format=torch.contiguous_format)
        _launch(problem, config, scale, {
            "q": kernel_operand(q[:, piece.rows]), "k": kernel_operand(k[:, piece.keys]),
            "v": kernel_operand(v[:, piece.keys]), "o": o_kernel, **extra,
        })
        if o_kernel is not o:
            o.copy_(o_kernel)
    return out.transpose(1, 2)
