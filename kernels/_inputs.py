"""Seeded random inputs in the kernels' layout and the numpy types of each storage dtype."""

from __future__ import annotations

from functools import cache

import numpy as np

from xe2tune.errors import InvalidProblem
from xe2tune.kernels._problem import DTYPES, KV_DTYPES, ProblemSpec


@cache
def _numpy_dtypes() -> dict[str, np.dtype]:
    # bf16 host data is ml_dtypes.bfloat16: the same 2-byte bits as sycl::ext::oneapi::bfloat16.
    # Imported on first use: it takes about a second, which readers of results never need.
    import ml_dtypes

    return {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
            "fp32": np.dtype(np.float32), "e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
            "e5m2": np.dtype(ml_dtypes.float8_e5m2)}


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype holding a storage dtype ("fp16", "bf16", "fp32", "e4m3", "e5m2")."""
    return _numpy_dtypes()[dtype]


def dtype_name(dtype: np.dtype) -> str:
    """The storage dtype name of a numpy dtype.

    Raises:
        InvalidProblem: for any other numpy dtype (the message lists the accepted ones).
    """
    for name, candidate in _numpy_dtypes().items():
        if np.dtype(dtype) == candidate and name in DTYPES:
            return name
    raise InvalidProblem(
        f"dtype {np.dtype(dtype)} is not supported; accepted: float16, bfloat16 "
        f"(ml_dtypes), float32 ({', '.join(DTYPES)})"
    )


def kv_dtype_name(dtype: np.dtype) -> str | None:
    """The FP8 K/V dtype name ("e4m3", "e5m2") of a numpy dtype, None for any other."""
    for name in KV_DTYPES:
        if np.dtype(dtype) == numpy_dtype(name):
            return name
    return None


def make_inputs(problem: ProblemSpec, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Q [B, q_len, Hq, D], K [B, kv_len, Hkv, D], V [B, kv_len, Hkv, Dv], then for FP8 K/V the
    dequantization scales kv_scale [2, Hkv] float32 (K's per KV head, then V's).

    Q is in the problem's dtype, K and V in ``kv_element_dtype``. Values are standard normal,
    never exactly zero (an all-zero region would hide unwritten or NaN-producing paths), from a
    generator seeded with ``seed``; FP8 K/V are those values divided by their scales (drawn in
    [0.5, 2], a different one per KV head) so that the dequantized inputs are unit-variance too.
    """
    rng = np.random.default_rng(seed)
    shapes = (
        (problem.batch, problem.q_len, problem.heads_q, problem.head_dim),
        (problem.batch, problem.kv_len, problem.heads_kv, problem.head_dim),
        (problem.batch, problem.kv_len, problem.heads_kv, problem.head_dim_v),
    )
    scales = None
    if problem.kv_dtype is not None:
        scales = rng.uniform(0.5, 2.0, (2, problem.heads_kv)).astype(np.float32)
    out = []
    for i, shape in enumerate(shapes):
        data = rng.standard_normal(shape, dtype=np.float32)
        data[data == 0] = 0.5
        if i and scales is not None:
            data = data / scales[i - 1][:, None]
        data = data.astype(numpy_dtype(problem.dtype if i == 0 else problem.kv_element_dtype))
        data[data.astype(np.float32) == 0] = 0.5  # FP8 rounds small values to 0
        out.append(data)
    return (*out, scales) if scales is not None else tuple(out)
