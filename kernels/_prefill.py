"""The prefill family: flash-attention forward over the whole KV range (sdpa_prefill.cpp)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import KernelLaunch, LaunchPlan
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._rules import Rule, check
from xe2tune.kernels._sdpa_family import SdpaFamilyBase, kv_scale_args

# Measured on the opencl:cpu device with 2 cores of AVX2 (8 fp32 lanes, 16 registers), hd128
# fp16 seq 1024 8 heads: see benchmarks/kernel_defaults.py (6 rows x 2 vectors of S per
# work-item: 12 accumulators of the 16 AVX2 registers). Later entries are fallbacks for devices
# or head dims where the first is invalid.
DEFAULT_PARAMS: tuple[dict[str, Any], ...] = (
    {"bq": 96, "bk": 64, "bd": 16, "bv": 16, "stages": 1, "subgroup_size": 8,
     "rows_per_item": 6, "kv_stage": True, "kv_pack": False},
    {"bq": 128, "bk": 32, "bd": 16, "bv": 16, "stages": 1, "subgroup_size": 8,
     "rows_per_item": 8, "kv_stage": True, "kv_pack": False},
    {"bq": 32, "bk": 16, "bd": 16, "bv": 16, "stages": 1, "subgroup_size": 8,
     "rows_per_item": 4, "kv_stage": False, "kv_pack": False},
)
# fp32 K/V are twice the bytes, and every work-group streams its head's whole K/V through the
# caches: a taller row tile re-reads them half as often. Measured hd128, 8 heads, configs timed
# in alternating rounds (`python benchmarks/kernel_defaults.py prefill --dtype fp32 --seq 2048
# --iters 3 --rounds 8 --params '{"bq": 96}' '{"bq": 192}' '{"bq": 288}'`): seq 2048 BQ 192 vs
# 96 -6 %, -4 %, -13 %, -7 % time in four runs, BQ 288 vs 96 +3 %, -1 %, -5 %, -3 %; seq 1024
# all three within 1.5 %; fp16 seq 2048 with BQ 288 +2 % (one run), so fp16 keeps 96.
FP32_BQ = 192
# With 16 fp32 lanes and 32 registers (AVX-512) one 16-lane vector per register: 8 rows x 2
# vectors of S (16 accumulators) and of each O split (BV 32). Measured on 2 Xeon (AVX-512)
# vCPUs, hd128 8 heads, configs timed in alternating rounds (`python
# benchmarks/kernel_defaults.py prefill [--dtype D] [--seq S] [--causal] --iters 2 --rounds 5
# --params ...`): vs the AVX2 default (SG_SIZE 8) 1.7x at seq 1024 fp16; BQ 256 vs 128 +16 %
# (fp16) and +10 % (fp32) at seq 2048, +4 % at seq 1024 fp16, -3 % and +8 % causal; BK 128 vs
# 64 +15 % fp16 and +2 % fp32 at seq 2048, +1 % fp16 and +12 % fp32 at seq 1024, +1 % and +5 %
# causal. kv_pack: +11 % at fp32 seq 1024, -20 % at seq 2048, so it is left to the tuner.
WIDE_PARAMS: dict[str, Any] = {
    "bq": 256, "bk": 128, "bd": 16, "bv": 32, "stages": 1, "subgroup_size": 16,
    "rows_per_item": 8, "kv_stage": True, "kv_pack": False,
}


class PrefillFamily(SdpaFamilyBase):
    """Prefill: one work-group per BQ rows (query positions x GQA group heads) per KV head.

    Extra knob: ``kv_pack`` (with ``kv_stage``), the staged fp32 K^T/V tiles are packed once per
    launch into global scratch by a pack kernel instead of copied into local memory by every
    work-group: no per-work-group transposes or barriers, contiguous tile reads.
    """

    name = "sdpa_prefill"
    mode = "prefill"
    source_file = "sdpa_prefill.cpp"
    kernel_names = ("xe2t_sdpa_prefill", "xe2t_sdpa_pack_kv")
    extra_knobs = ("kv_pack",)
    knob_defaults = {"kv_pack": False}

    def parameter_space(self, problem: ProblemSpec) -> Mapping[str, Sequence[Any]]:
        """The Cartesian space: parameter name -> candidate values, for this problem.

        Raises:
            InvalidProblem: if the problem is not a prefill problem.
        """
        self._check_problem(problem)
        return {
            "bq": (8, 16, 32, 48, 64, 96, 128, 192, 256, 288, 384),
            "bk": (8, 16, 32, 64, 128),
            "bd": (8, 16, 32, 64),
            "bv": (8, 16, 32, 64),
            "stages": (0, 1, 2, 3),
            "subgroup_size": (4, 8, 16),
            "rows_per_item": (1, 2, 4, 6, 8, 12),
            "kv_stage": (False, True),
            "kv_pack": (False, True),
        }

    def _extra_rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        return (check(("kv_stage", "kv_pack"), lambda p: p["kv_stage"] or not p["kv_pack"],
                      lambda p: "kv_pack packs the staged tiles: it needs kv_stage"),)

    def default_config(self, problem: ProblemSpec, caps: DeviceCaps) -> LauncherConfig:
        """The measured default, or the first valid fallback on other devices.

        Raises:
            InvalidProblem: if no config of the family fits the problem on this device.
        """
        self._check_problem(problem)
        candidates = DEFAULT_PARAMS
        rows = problem.q_len * problem.group_size
        if caps.simd_width >= 16:
            # A row tile taller than the rows would only compute padding.
            bq = max(b for b in (8, 16, 32, 64, 128, WIDE_PARAMS["bq"]) if b <= max(8, rows))
            candidates = ({**WIDE_PARAMS, "bq": bq}, *DEFAULT_PARAMS)
        elif problem.dtype == "fp32" and rows >= 2 * FP32_BQ:
            candidates = ({**DEFAULT_PARAMS[0], "bq": FP32_BQ}, *DEFAULT_PARAMS)
        return self._first_valid(candidates, problem, caps)

    def plan(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps, *,
        scale: float | None = None,
    ) -> LaunchPlan:
        """The attention launch: global (batch * heads_kv, row_tiles * NT), local (1, NT);
        with ``kv_pack``, after the pack launch: global (batch * heads_kv, K/V blocks), local
        (1, 1), into the ``tiles`` scratch (fp32 K^T and V of every block).

        Raises:
            InvalidConfig: if the config is invalid (with the reason).
        """
        self.require_valid(config, problem, caps)
        nt = config.subgroup_layout[0]
        rows = problem.q_len * problem.group_size
        row_tiles = -(-rows // config.bq)
        heads = problem.batch * problem.heads_kv
        attention = KernelLaunch(
            kernel=self.kernel_names[0],
            args=("q", "k", "v", "o", "tiles", problem.q_len, problem.kv_len, problem.heads_q,
                  problem.heads_kv, self.qscale(problem, scale), int(problem.causal),
                  *kv_scale_args(problem)),
            arg_types=("buffer",) * 5 + ("int",) * 4 + ("float", "int")
            + ("buffer",) * len(kv_scale_args(problem)),
            global_size=(heads, row_tiles * nt),
            local_size=(1, nt),
        )
        launches: tuple[KernelLaunch, ...] = (attention,)
        tile_bytes = 4  # unused by the kernel unless packed, but every argument needs a buffer
        if config.knob("kv_pack"):
            blocks = -(-problem.kv_len // config.bk)
            tile_bytes = 4 * heads * blocks * config.bk * (problem.head_dim + problem.head_dim_v)
            pack = KernelLaunch(
                kernel=self.kernel_names[1],
                args=("k", "v", "tiles", problem.kv_len, problem.heads_kv),
                arg_types=("buffer",) * 3 + ("int",) * 2,
                global_size=(heads, blocks),
                local_size=(1, 1),
            )
            launches = (pack, attention)
        return LaunchPlan(self.source_file, self.kernel_names, self.defines(config, problem, caps),
                          launches, {"tiles": tile_bytes})
