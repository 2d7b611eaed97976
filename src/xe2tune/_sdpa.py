"""``xe2tune.sdpa``: scaled dot-product attention on numpy arrays through the SYCL kernels."""

from __future__ import annotations

import dpctl
import numpy as np
from numpy.typing import ArrayLike

from xe2tune._tuned import ConfigChoice, choose_launcher
from xe2tune.errors import InvalidProblem
from xe2tune.harness import PlanExecutor, device_caps, open_queue
from xe2tune.kernels import ProblemSpec, build_program, dtype_name, get_family, kv_dtype_name


def _as_4d(name: str, array: np.ndarray) -> np.ndarray:
    if array.ndim == 3:
        return array[np.newaxis]
    if array.ndim == 4:
        return array
    raise InvalidProblem(
        f"{name} must be [batch, seq, heads, head_dim] or [seq, heads, head_dim], "
        f"got {array.ndim} dimensions"
    )


def _kv_scales(k_scale: ArrayLike, v_scale: ArrayLike, heads_kv: int) -> np.ndarray:
    """kv_scale [2, heads_kv] float32 from a per-tensor (scalar) or per-KV-head scale each."""
    rows = []
    for name, value in (("k_scale", k_scale), ("v_scale", v_scale)):
        scale = np.asarray(value, dtype=np.float32)
        if scale.shape not in ((), (heads_kv,)):
            raise InvalidProblem(f"{name} must be a scalar or one value per KV head "
                                 f"({heads_kv}), got shape {scale.shape}")
        if not np.all(np.isfinite(scale)):
            raise InvalidProblem(f"{name} must be finite, got {value!r}")
        rows.append(np.broadcast_to(scale, (heads_kv,)))
    return np.ascontiguousarray(np.stack(rows))


def sdpa(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    causal: bool = False,
    scale: float | None = None,
    k_scale: ArrayLike = 1.0,
    v_scale: ArrayLike = 1.0,
    config: ConfigChoice = None,
    device: str | dpctl.SyclQueue | None = None,
) -> np.ndarray:
    """softmax(scale * Q K^T) V computed by the SDPA kernels, returned in Q's dtype.

    Layout: q [batch, q_len, heads_q, D], k [batch, kv_len, heads_kv, D] and v [batch, kv_len,
    heads_kv, Dv] (or the same without the batch axis); Dv may differ from D (latent attention:
    D 192 / Dv 128 prefill, D 576 / Dv 512 absorbed decode); heads_q must be a multiple of
    heads_kv (MHA, GQA, MQA). dtype float16, ml_dtypes.bfloat16 or float32, the same for all
    three, except FP8 K/V: k and v both ml_dtypes.float8_e4m3fn or both float8_e5m2 with q
    float16 or bfloat16, dequantized as k * k_scale and v * v_scale (each a scalar, or one value
    per KV head); the scales are refused for other dtypes unless 1. q_len <= 16 runs the decode
    family, longer the prefill family. ``causal`` aligns the mask bottom-right (query i sees keys
    0 .. i + kv_len - q_len); a query that sees no key gets 0. ``scale`` defaults to 1/sqrt(D).
    ``config`` is a LauncherConfig or its JSON dict; None (the default) launches the tuned
    config: the best that ``xe2tune search`` stored for this problem on this device in the
    results database (``XE2TUNE_DB``, else the user data dir's), or for the nearest tuned problem
    as ``xe2tune best`` answers, read once per problem per process; the kernel family's default
    config when nothing tuned fits. ``"default"`` forces the family default.
    ``device`` is a SYCL filter string or queue (default: the first GPU, else opencl:cpu).

    Raises:
        InvalidProblem: for shapes, dtypes, scales or head dims the kernels do not support.
        InvalidConfig: if ``config`` cannot run on this problem and device (with the reason).
        DeviceError: if ``device`` matches no SYCL device.
        KernelCompileError: if the runtime compiler rejects the kernel.

    Example:
        >>> import numpy as np, xe2tune
        >>> q = np.random.rand(128, 8, 64).astype(np.float16)
        >>> xe2tune.sdpa(q, q, q, causal=True).shape
        (128, 8, 64)
    """
    arrays = {"q": np.asarray(q), "k": np.asarray(k), "v": np.asarray(v)}
    squeeze = arrays["q"].ndim == 3
    q4, k4, v4 = (_as_4d(name, a) for name, a in arrays.items())
    if any(a.ndim != arrays["q"].ndim for a in arrays.values()):
        raise InvalidProblem("q, k and v must all have a batch axis or all lack one")
    kv_dtype = kv_dtype_name(k4.dtype)
    if k4.dtype != v4.dtype or (kv_dtype is None and q4.dtype != k4.dtype):
        raise InvalidProblem(
            f"q, k, v dtypes differ: {q4.dtype}, {k4.dtype}, {v4.dtype}; k and v must share "
            "q's dtype, or both be float8_e4m3fn / float8_e5m2 (ml_dtypes) with q fp16/bf16")
    if k4.shape[:3] != v4.shape[:3]:
        raise InvalidProblem(f"k {k4.shape} and v {v4.shape} must agree on batch, kv_len and "
                             "heads (v's head dim may differ)")
    if q4.shape[0] != k4.shape[0] or q4.shape[3] != k4.shape[3]:
        raise InvalidProblem(
            f"q {q4.shape} and k {k4.shape} must agree on batch and head dim"
        )
    batch, q_len, heads_q, head_dim = q4.shape
    problem = ProblemSpec(
        mode=ProblemSpec.choose_mode(q_len), head_dim=head_dim, dtype=dtype_name(q4.dtype),
        q_len=q_len, kv_len=k4.shape[1], heads_q=heads_q, heads_kv=k4.shape[2], batch=batch,
        causal=bool(causal), head_dim_v=v4.shape[3], kv_dtype=kv_dtype,
    )
    scales = _kv_scales(k_scale, v_scale, problem.heads_kv)
    if kv_dtype is None and not np.all(scales == 1.0):
        raise InvalidProblem("k_scale and v_scale dequantize FP8 K/V; k and v are "
                             f"{k4.dtype}: leave them at 1")
    queue = device if isinstance(device, dpctl.SyclQueue) else open_queue(device)
    caps = device_caps(queue.sycl_device)
    launcher = choose_launcher(problem, caps, config)
    plan = get_family(launcher.family).plan(launcher, problem, caps, scale=scale)
    built = build_program(queue, plan.source_file, plan.kernel_names, plan.defines)
    executor = PlanExecutor(queue, built, plan, problem)
    inputs = [np.ascontiguousarray(a) for a in (q4, k4, v4)]
    buffers = executor.allocate(*inputs, scales if kv_dtype is not None else None)
    executor.launch_and_wait(buffers)
    out = executor.read_output(buffers)
    return out[0] if squeeze else out
