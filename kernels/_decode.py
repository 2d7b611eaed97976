"""The decode family: two-phase split-KV attention for q_len 1..16 (kernels/sdpa_decode.cpp)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import KernelLaunch, LaunchPlan
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._rules import Rule, check
from xe2tune.kernels._sdpa_family import SdpaFamilyBase, kv_scale_args

# Measured on the opencl:cpu device (2 cores, AVX2), hd128 fp16 32/8 heads kv 4096 and 16384: see
# benchmarks/kernel_defaults.py; with 16 fp32 lanes (AVX-512) the first entry takes WIDE_TILES (kv
# 16384: 4.76 vs 5.60 ms, `python benchmarks/kernel_defaults.py decode --seq 16384 --iters 5
# --rounds 4 --params ...`), with BK 16: on a quiet Zen 5 EPYC it took 0.92-1.02 of BK 32's time at
# kv 4096 and 16384 for fp16, bf16, e4m3 and e5m2 K/V, faster in 7 of the 8 (`... decode [--dtype
# bf16] [--kv-dtype e4m3] --seq S --iters 5 --rounds 12 --params '{}' '{"bk": 32}'`, 2026-12-05).
# ``bq`` and ``rows_per_item`` are then fitted to the problem's rows (q_len x GQA group) so a
# single query row does not compute padding rows, ``kv_heads_per_group`` to the largest power of
# two up to the entry's (8; 32 with WIDE_TILES) dividing heads_kv, and ``kv_chunk`` shrunk (down
# to 128) until phase 1 has at least MIN_SPLIT_GROUPS work-groups. Later entries are fallbacks.
# Up to 32 KV heads per work-group rather than 8 where heads_kv allows, so far with 16 lanes
# only (unmeasured with 8), each key's read of a work-group that much longer; on a Zen 4 EPYC,
# load average under 1 at each start, 2026-12-06: 16 over 8 0.69-0.97 of the time at 32/32 and
# 16/16 heads (kv 1024, 4096, 16384), 64/16 and 32/16 (kv 16384), fp16, bf16 and e4m3 K/V
# (`python benchmarks/kernel_defaults.py decode --heads 32/32 [--dtype bf16] [--kv-dtype e4m3]
# --seq S --iters 5 --rounds 8 --params '{"kv_heads_per_group": 8}' '{}'`, the default then 16);
# 32 over 16 0.80-0.99 in ten cases (32/32, 64/32, 128/32 heads, kv 1024-16384, fp16, bf16,
# e4m3; the same command with '{"kv_heads_per_group": 16}' '{}'), 0.86-1.11 in twelve on another
# machine of that kind (bf16 64/32 heads at kv 1024 the one above 1.00).
# prefetch_shares (2-byte K/V, several KV heads per work-group): on with 8 fp32 lanes (AVX2), off
# with 16 (WIDE_TILES). On a quiet Zen 2 EPYC (AVX2), shares over rows at hd128 32/8: fp16 kv
# 1024 / 16384 / 16384 causal 0.78 / 0.74 / 0.77, bf16 kv 4096 0.78, fp32 kv 4096 1.00 (`python
# benchmarks/kernel_defaults.py decode [--dtype T] --seq S [--causal] --iters 5 --rounds 8
# --params '{"prefetch_shares": false}' '{}'`, 2026-12-05); with AVX-512 fp16 5-11 % slower on a
# Zen 5 EPYC and a Xeon, 0.92 of the time on a Zen 4 EPYC (kv 16384; docs/fp8-decode.md): off
# there until more machines agree. The default keeps it only where the space allows it
# (``default_config``).
DEFAULT_PARAMS: tuple[dict[str, Any], ...] = (
    {"bq": 4, "bk": 16, "bd": 32, "bv": 16, "stages": 1, "subgroup_size": 8,
     "rows_per_item": 4, "kv_stage": False, "kv_chunk": 1024, "kv_heads_per_group": 8,
     "prefetch_shares": True},
    {"bq": 4, "bk": 16, "bd": 16, "bv": 16, "stages": 1, "subgroup_size": 8,
     "rows_per_item": 4, "kv_stage": False, "kv_chunk": 512, "kv_heads_per_group": 1},
)
WIDE_TILES = {"subgroup_size": 16, "bk": 16, "bd": 32, "bv": 32, "prefetch_shares": False,
              "kv_heads_per_group": 32}
MIN_SPLIT_GROUPS = 4


def _shares_change_the_kernel(problem: ProblemSpec, kv_heads_per_group: int,
                              kv_stage: bool) -> bool:
    """Whether prefetch_shares builds other code: 2-byte K/V read in place by several KV heads
    per work-group (FP8 K/V always prefetch in shares; one head or staged tiles never do)."""
    return problem.kv_dtype is None and kv_heads_per_group > 1 and not kv_stage


def kv_chunk_rule() -> Rule:
    """Phase 1 splits the keys in whole K blocks (both decode families)."""
    return check(("kv_chunk", "bk"), lambda p: p["kv_chunk"] >= 1 and p["kv_chunk"] % p["bk"] == 0,
                 lambda p: f"kv_chunk {p['kv_chunk']} must be a positive multiple of BK {p['bk']}")


def split_kv_launches(
    kernel_names: tuple[str, ...], problem: ProblemSpec, qscale: float, kv_chunk: int, *,
    split_global: tuple[int, int], split_local: tuple[int, int],
    combine_global: tuple[int, int], combine_local: tuple[int, int],
) -> tuple[KernelLaunch, KernelLaunch]:
    """The two launches of a split-KV decode (both decode families' kernels take these
    arguments): phase 1 writes per-chunk partials to ``part_o``/``part_ml``, phase 2 combines;
    FP8 K/V builds take the ``kv_scale`` buffer last in both."""
    shape = (problem.q_len, problem.kv_len, problem.heads_q, problem.heads_kv)
    scales = kv_scale_args(problem)
    split = KernelLaunch(
        kernel=kernel_names[0],
        args=("q", "k", "v", "part_o", "part_ml", *shape, qscale, int(problem.causal),
              kv_chunk, *scales),
        arg_types=("buffer",) * 5 + ("int",) * 4 + ("float", "int", "int")
        + ("buffer",) * len(scales),
        global_size=split_global, local_size=split_local,
    )
    combine = KernelLaunch(
        kernel=kernel_names[1],
        args=("part_o", "part_ml", "o", *shape, kv_chunk, *scales),
        arg_types=("buffer",) * 3 + ("int",) * 5 + ("buffer",) * len(scales),
        global_size=combine_global, local_size=combine_local,
    )
    return split, combine


class DecodeFamily(SdpaFamilyBase):
    """Decode: phase 1 per (rows, KV chunk) partials, phase 2 combine.

    Extra knobs: ``kv_chunk``, keys per split of phase 1 (a multiple of BK), a run-time
    argument; ``kv_heads_per_group`` (define HB), KV heads one phase-1 work-group processes
    block by block, so K/V are read in memory order rather than one head's rows apart;
    ``prefetch_shares`` (define PREFETCH_SHARES), for 2-byte K/V read in place by several heads:
    prefetch K and V in shares of every head's rows, as FP8 K/V always do, instead of row by row
    (decode hd128 fp16 32/8, kv 16384: 0.74 of the time on a Zen 2 EPYC, 0.92 on a Zen 4, 5-11 %
    slower on a Zen 5 EPYC and a Xeon; the default: on with 8 lanes, off with 16).
    """

    name = "sdpa_decode"
    mode = "decode"
    source_file = "sdpa_decode.cpp"
    kernel_names = ("xe2t_sdpa_decode_split", "xe2t_sdpa_decode_combine")
    extra_knobs = ("kv_chunk", "kv_heads_per_group", "prefetch_shares")
    knob_defaults = {"prefetch_shares": False}

    def parameter_space(self, problem: ProblemSpec) -> Mapping[str, Sequence[Any]]:
        """The Cartesian space: parameter name -> candidate values, for this problem.

        Raises:
            InvalidProblem: if the problem is not a decode problem.
        """
        self._check_problem(problem)
        # A work-group tile larger than the rows (q_len x GQA group) only computes padding.
        rows = problem.q_len * problem.group_size
        return {
            "bq": tuple(b for b in (1, 2, 4, 8, 16, 32, 64, 128) if b < 2 * rows),
            "bk": (8, 16, 32, 64),
            "bd": (8, 16, 32, 64),
            "bv": (8, 16, 32, 64),
            "stages": (0, 1, 2, 3),
            "subgroup_size": (4, 8, 16),
            "rows_per_item": (1, 2, 4, 8),
            "kv_stage": (False, True),
            "kv_chunk": (128, 256, 512, 1024, 2048),
            "kv_heads_per_group": tuple(h for h in (1, 2, 4, 8, 16, 32)
                                        if problem.heads_kv % h == 0),
            "prefetch_shares": (False, True),
        }

    def _extra_rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        hb = "kv_heads_per_group"
        shares = "prefetch_shares"
        # Only where it changes the kernel (several heads read in place, 2-byte K/V), so the
        # space holds no two points that build the same code.
        where = ("K/V in fp8 always prefetch in shares" if problem.kv_dtype is not None
                 else "it applies to several KV heads per work-group read in place "
                      f"({hb} > 1, kv_stage off)")
        return (kv_chunk_rule(), check(
            (hb,), lambda p: p[hb] >= 1 and problem.heads_kv % p[hb] == 0,
            lambda p: f"{hb} {p[hb]} must be a positive divisor of heads_kv {problem.heads_kv}"),
            check((shares, hb, "kv_stage"),
                  lambda p: not p[shares] or _shares_change_the_kernel(problem, p[hb],
                                                                        p["kv_stage"]),
                  lambda p: f"{shares} must be off: {where}"))

    def defines(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps
    ) -> dict[str, int]:
        """The shared defines plus HB (KV heads per phase-1 work-group) and, when on,
        PREFETCH_SHARES."""
        # PREFETCH_SHARES only when on: the builds without it stay the kernels (and the cached
        # builds) they were before the knob.
        shares = {"PREFETCH_SHARES": 1} if config.knob("prefetch_shares") else {}
        return {**super().defines(config, problem, caps),
                "HB": int(config.knob("kv_heads_per_group")), **shares}

    def default_config(self, problem: ProblemSpec, caps: DeviceCaps) -> LauncherConfig:
        """The measured default, or the first valid fallback on other devices.

        Raises:
            InvalidProblem: if no config of the family fits the problem on this device.
        """
        self._check_problem(problem)
        rows = problem.q_len * problem.group_size
        tm = min(4, 1 << (rows - 1).bit_length())
        bq = max(tm, min(64, 1 << (rows - 1).bit_length()))
        candidates = DEFAULT_PARAMS
        if caps.simd_width >= 16:
            candidates = ({**DEFAULT_PARAMS[0], **WIDE_TILES}, *DEFAULT_PARAMS)
        fitted = []
        head_groups = self.parameter_space(problem)["kv_heads_per_group"]  # divisors of heads_kv
        for params in candidates:
            hb = max(h for h in head_groups if h <= params["kv_heads_per_group"])
            chunk = params["kv_chunk"]
            groups = problem.batch * problem.heads_kv // hb
            while chunk > 128 and groups * -(-problem.kv_len // chunk) < MIN_SPLIT_GROUPS:
                chunk //= 2
            shares = (params.get("prefetch_shares", False)
                      and _shares_change_the_kernel(problem, hb, params["kv_stage"]))
            fitted.append({**params, "bq": bq, "rows_per_item": tm, "kv_chunk": chunk,
                           "kv_heads_per_group": hb, "prefetch_shares": shares})
        return self._first_valid(fitted, problem, caps)

    def plan(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps, *,
        scale: float | None = None,
    ) -> LaunchPlan:
        """Two launches: split over (batch * heads_kv / HB, row_tiles * chunks * NT), local
        (1, NT); combine over (batch * heads_kv, rows), local (1, 1).

        Raises:
            InvalidConfig: if the config is invalid (with the reason).
        """
        self.require_valid(config, problem, caps)
        kv_chunk = int(config.knob("kv_chunk"))
        hb = int(config.knob("kv_heads_per_group"))
        nt = config.subgroup_layout[0]
        rows = problem.q_len * problem.group_size
        row_tiles = -(-rows // config.bq)
        chunks = -(-problem.kv_len // kv_chunk)
        heads = problem.batch * problem.heads_kv
        split, combine = split_kv_launches(
            self.kernel_names, problem, self.qscale(problem, scale), kv_chunk,
            split_global=(heads // hb, row_tiles * chunks * nt), split_local=(1, nt),
            combine_global=(heads, rows), combine_local=(1, 1))
        partials = heads * chunks * rows
        scratch = {"part_o": 4 * partials * problem.head_dim_v, "part_ml": 8 * partials}
        return LaunchPlan(self.source_file, self.kernel_names, self.defines(config, problem, caps),
                          (split, combine), scratch)
