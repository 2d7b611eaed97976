"""Seeded random inputs in the kernels' layout and the numpy types of each storage dtype."""

from __future__ import annotations

from functools import cache

import numpy as np

from xe2tune.errors import InvalidProblem
from xe2tune.kernels._problem import DTYPES, ProblemSpec


@cache
def _numpy_dtypes() -> dict[str, np.dtype]:
    # bf16 host data is ml_dtypes.bfloat16: the same 2-byte bits as sycl::ext::oneapi::bfloat16.
    # Imported on first use: it takes about a second, which readers of results never need.
    import ml_dtypes

    return {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
            "fp32": np.dtype(np.float32)}


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype holding a storage dtype ("fp16", "bf16", "fp32")."""
    return _numpy_dtypes()[dtype]


def dtype_name(dtype: np.dtype) -> str:
    """The storage dtype name of a numpy dtype.

    Raises:
        InvalidProblem: for any other numpy dtype (the message lists the accepted ones).
    """
    for name, candidate in _numpy_dtypes().items():
        if np.dtype(dtype) == candidate:
            return name
    raise InvalidProblem(
        f"dtype {np.dtype(dtype)} is not supported; accepted: float16, bfloat16 "
        f"(ml_dtypes), float32 ({', '.join(DTYPES)})"
    )


def make_inputs(problem: ProblemSpec, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q [B, q_len, Hq, D], K and V [B, kv_len, Hkv, D] in the problem's dtype.

    Values are standard normal, never exactly zero (an all-zero region would hide unwritten or
    NaN-producing paths), from a generator seeded with ``seed``.
    """
    rng = np.random.default_rng(seed)
    shapes = (
        (problem.batch, problem.q_len, problem.heads_q, problem.head_dim),
        (problem.batch, problem.kv_len, problem.heads_kv, problem.head_dim),
        (problem.batch, problem.kv_len, problem.heads_kv, problem.head_dim_v),
    )
    out = []
    for shape in shapes:
        data = rng.standard_normal(shape, dtype=np.float32).astype(numpy_dtype(problem.dtype))
        data[data == 0] = 0.5
        out.append(data)
    return out[0], out[1], out[2]
