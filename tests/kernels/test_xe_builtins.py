"""The emulated Xe primitives hold what the native built-ins hold, lane by lane.

The xmx family's tile ops are written once over ``xe::Builtins`` (kernels/sdpa_xe_builtins.hpp):
on Intel GPUs the OpenCL built-ins of cl_intel_subgroup_2d_block_io and
cl_intel_subgroup_matrix_multiply_accumulate, elsewhere their emulation, which is what the CPU
correctness grid runs. Element ownership of the two is the same only if the emulation follows
the built-ins' documented semantics; this test writes those semantics in numpy (lane j holds
column j; the transposed load gives lane n row y + n's dwords; VNNI pairs rows 2p and 2p + 1,
and for bytes packs rows 4p .. 4p + 3;
reads outside the surface are 0, writes outside it dropped; DPAS takes A[r][k] from lane k)
and checks the emulation on the CPU device against them, bounds included. (The native forms each
built-in compiles to are checked in the Xe2 ISA tests.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xe2tune.config import child_runtime_env

RUNNER = Path(__file__).parents[1] / "_xe_builtins_runner.py"
HEIGHT, PITCH, WIDTH = 20, 40, 36  # rows; elements per row in memory; elements inside
X, Y = 24, 8  # a block that crosses the right edge (x + 16 > 36) and the bottom (y + 16 > 20)


@pytest.fixture(scope="module")
def probe():
    rng = np.random.default_rng(7)
    values = rng.uniform(-2, 2, size=(HEIGHT, PITCH)).astype(np.float16)
    request = {"mat": values.view(np.uint16).reshape(-1).tolist(), "width": WIDTH * 2,
               "height": HEIGHT, "pitch": PITCH * 2, "x": X, "y": Y}
    env = child_runtime_env("0")  # with mode 0's own persistent kernel cache
    proc = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(request), env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return values, {k: np.asarray(v) for k, v in out.items()}


def inside(values: np.ndarray) -> np.ndarray:
    """The surface as the hardware's bounds check sees it: 0 outside height x width."""
    bits = np.zeros((64, 64), dtype=np.uint16)
    bits[:HEIGHT, :WIDTH] = values.view(np.uint16)[:, :WIDTH]
    return bits


def test_transposed_load_gives_lane_n_the_dwords_of_row_y_plus_n(probe):
    values, out = probe
    bits = inside(values).astype(np.uint32)
    t = out["t"].astype(np.int64).reshape(16, 8) & 0xFFFFFFFF
    for n in range(16):
        for p in range(8):
            col = X + 2 * p
            assert t[n, p] == bits[Y + n, col] | bits[Y + n, col + 1] << 16, (n, p)
    assert (t[HEIGHT - Y:] == 0).all()  # rows past the height read 0


def test_vnni_load_pairs_rows_2p_and_2p_plus_1_of_column_x_plus_n(probe):
    values, out = probe
    bits = inside(values).astype(np.uint32)
    v = out["v"].astype(np.int64).reshape(16, 8) & 0xFFFFFFFF
    for n in range(16):
        for p in range(8):
            assert v[n, p] == bits[Y + 2 * p, X + n] | bits[Y + 2 * p + 1, X + n] << 16, (n, p)
    assert (v[WIDTH - X:] == 0).all()  # columns past the width read 0


def test_byte_vnni_load_packs_rows_4p_to_4p_plus_3_of_byte_column_x_plus_n(probe):
    """The FP8 V load: 32 rows x 16 byte columns at (2 X + 16, Y - 4), past the surface's
    right edge (byte 72) and bottom (row 20) for some lanes and rows."""
    values, out = probe
    surface = np.zeros((64, 160), dtype=np.uint8)
    surface[:HEIGHT, :WIDTH * 2] = values.view(np.uint8).reshape(HEIGHT, -1)[:, :WIDTH * 2]
    v8 = out["v8"].astype(np.int64).reshape(16, 8) & 0xFFFFFFFF
    x, y = 2 * X + 16, Y - 4
    for n in range(16):
        for p in range(8):
            want = sum(int(surface[y + 4 * p + i, x + n]) << (8 * i) for i in range(4))
            assert v8[n, p] == want, (n, p)
    assert (v8[WIDTH * 2 - x:] == 0).all() and v8[: WIDTH * 2 - x].any()


def test_local_tile_gives_lane_j_column_j(probe):
    values, out = probe
    tile = values.reshape(-1)[:128].view(np.uint16).reshape(8, 16)
    a = out["a"].astype(np.int64).reshape(16, 8) & 0xFFFF
    assert (a == tile.T).all()


def test_dpas_and_row_reductions_follow_the_register_layout(probe):
    values, out = probe
    a = values.reshape(-1)[:128].reshape(8, 16).astype(np.float32)        # A[r][k]
    b = inside(values)[Y:Y + 16, X:X + 16].view(np.float16).astype(np.float32)  # B[k][n]
    c = out["c"].reshape(16, 8).T                                           # C[r][lane]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    rows = np.arange(16) // 2  # lane j holds row j / 2 of a RowVec
    np.testing.assert_allclose(out["max"], c.max(axis=1)[rows], rtol=1e-6)
    np.testing.assert_allclose(out["sum"], c.sum(axis=1)[rows], rtol=1e-5, atol=1e-5)


def test_block_store_writes_lane_j_to_column_x_plus_j_inside_the_surface_only(probe):
    values, out = probe
    stored = out["s"].reshape(HEIGHT, PITCH)
    a = out["a"].astype(np.int64).reshape(16, 8) & 0xFFFF  # lane j, row r
    expected = np.zeros((HEIGHT, PITCH), dtype=np.int64)
    y = HEIGHT - 4  # rows y + 4 .. y + 7 are past the height: dropped
    for r in range(4):
        for j in range(WIDTH - X):  # columns past the width: dropped
            expected[y + r, X + j] = a[j, r]
    assert (stored == expected).all()
