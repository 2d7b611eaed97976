"""Seeded random inputs in the kernels' layout and the numpy types of each storage dtype."""

from __future__ import annotations

from functools import cache

import numpy as np

from xe2tune.errors import InvalidProblem
from xe2tune.kernels._problem import DTYPES, KV_DTYPES, ProblemSpec

# The storage dtypes numpy has itself; the others are ml_dtypes' (below).
_NUMPY_OWN = {"fp16": np.dtype(np.float16), "fp32": np.dtype(np.float32)}


@cache
def _ml_dtypes() -> dict[str, np.dtype]:
    # bf16 host data is ml_dtypes.bfloat16: the same 2-byte bits as sycl::ext::oneapi::bfloat16.
    # Imported only for these dtypes: its extension's start-up takes 0.55 CPU seconds (`python
    # -X importtime -c "import numpy, ml_dtypes"`, AMD EPYC Zen 4), which every device process
    # of an fp16 or fp32 search paid, and readers of results never need.
    import ml_dtypes

    return {"bf16": np.dtype(ml_dtypes.bfloat16), "e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
            "e5m2": np.dtype(ml_dtypes.float8_e5m2)}


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype holding a storage dtype ("fp16", "bf16", "fp32", "e4m3", "e5m2")."""
    own = _NUMPY_OWN.get(dtype)
    return own if own is not None else _ml_dtypes()[dtype]


def _storage_name(dtype: np.dtype, names: tuple[str, ...]) -> str | None:
    """Which of ``names`` (storage dtypes) ``dtype`` holds, if any."""
    dtype = np.dtype(dtype)
    for name, candidate in _NUMPY_OWN.items():
        if dtype == candidate:
            return name if name in names else None
    return next((name for name, candidate in _ml_dtypes().items()
                 if dtype == candidate and name in names), None)


def dtype_name(dtype: np.dtype) -> str:
    """The storage dtype name of a numpy dtype.

    Raises:
        InvalidProblem: for any other numpy dtype (the message lists the accepted ones).
    """
    name = _storage_name(dtype, DTYPES)
    if name is None:
        raise InvalidProblem(
            f"dtype {np.dtype(dtype)} is not supported; accepted: float16, bfloat16 "
            f"(ml_dtypes), float32 ({', '.join(DTYPES)})"
        )
    return name


def kv_dtype_name(dtype: np.dtype) -> str | None:
    """The FP8 K/V dtype name ("e4m3", "e5m2") of a numpy dtype, None for any other."""
    return _storage_name(dtype, KV_DTYPES)


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
