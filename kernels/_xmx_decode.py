"""The xmx decode family: two-phase split-KV attention on matrix engines (sdpa_xmx_decode.cpp)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xe2tune.kernels._baselines import xmx_baseline_params
from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._decode import kv_chunk_rule, split_kv_launches
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import LaunchPlan
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._rules import Rule
from xe2tune.kernels._xmx_family import DPAS_M, SUBGROUP, XmxFamilyBase, uses_native_builtins


def _shape(bq: int, bk: int, sg_k: int, *, bd: int = 32, bv: int = 32, stages: int = 1,
           grf: int = 256, kv_chunk: int = 1024, sg_q: int = 1) -> dict[str, int]:
    return {"bq": bq, "bk": bk, "bd": bd, "bv": bv, "sg_q": sg_q, "sg_k": sg_k,
            "stages": stages, "grf": grf, "kv_chunk": kv_chunk}


# After the published configs of the head dim (kernels/_baselines.py): one 16-key fragment
# per subgroup with BD 32 (any head dim), then a small tile for devices without a GRF model (the
# emulated built-ins on a CPU).
FALLBACKS: tuple[dict[str, int], ...] = (
    _shape(8, 128, 8),
    _shape(8, 32, 2, grf=128, kv_chunk=256),
)


# Dv above this splits V's columns among work-groups (dv_splits): an 8-row fragment of O
# [8, Dv] fp32 takes Dv / 2 registers, so from Dv 512 on it alone fills Xe2's 256.
SPLIT_DV_ABOVE = 256
DV_SPLITS = (1, 2, 4)


class XmxDecodeFamily(XmxFamilyBase):
    """Decode: phase 1 per (rows, KV chunk) partials, phase 2 combine.

    Extra knobs: ``kv_chunk``, keys per split of phase 1 (a multiple of BK), a run-time argument;
    for latent decode (Dv > 256) only, ``dv_splits``: phase-1 work-groups that share V's columns
    (each computes the scores over all of D and Dv / dv_splits columns of O). Rows (q_len x GQA
    group) are padded to whole BQ tiles of whole 8-row fragments.
    """

    name = "sdpa_xmx_decode"
    mode = "decode"
    source_file = "sdpa_xmx_decode.cpp"
    kernel_names = ("xe2t_xmx_decode_split", "xe2t_xmx_decode_combine")
    extra_knobs = ("kv_chunk",)
    optional_knobs = ("dv_splits",)

    def dv_split_options(self, problem: ProblemSpec) -> tuple[int, ...]:
        """(1, 2, 4) for Dv above 256 (the splits leaving whole 32-column halves), else (1,)."""
        if problem.head_dim_v <= SPLIT_DV_ABOVE:
            return (1,)
        return tuple(s for s in DV_SPLITS if problem.head_dim_v % (s * 32) == 0)

    def parameter_space(self, problem: ProblemSpec) -> Mapping[str, Sequence[Any]]:
        """The Cartesian space: parameter name -> candidate values, for this problem.

        Raises:
            InvalidProblem: if the problem is not an fp16/bf16 decode problem.
        """
        self._check_problem(problem)
        rows = problem.q_len * problem.group_size
        splits = self.dv_split_options(problem)
        # A tile taller than the padded rows only computes padding.
        return {
            "bq": tuple(b for b in (8, 16, 32, 64, 128) if b == DPAS_M or b < 2 * rows),
            "bk": (16, 32, 64, 128, 256, 512),
            "bd": (16, 32, 64),
            "bv": (16, 32, 64),
            "sg_q": (1, 2, 4),
            "sg_k": (1, 2, 4, 8, 16),
            "stages": (0, 1, 2),
            "grf": (128, 256),
            "kv_chunk": (256, 512, 1024, 2048, 4096),
            **({"dv_splits": splits} if splits != (1,) else {}),
        }

    def _extra_rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        return (kv_chunk_rule(),)

    def default_config(self, problem: ProblemSpec, caps: DeviceCaps) -> LauncherConfig:
        """The first valid published config or fallback (for latent decode with the fewest
        ``dv_splits`` that fit), ``kv_chunk`` halved (down to BK) until phase 1 has a
        work-group per compute unit.

        Raises:
            InvalidProblem: if the family cannot serve the problem or no config fits the device.
        """
        self._check_problem(problem)
        rows = problem.q_len * problem.group_size
        splits = self.dv_split_options(problem)
        fitted = []
        candidates = [p for _, p in xmx_baseline_params(self.mode, problem.head_dim)]
        for params in [*candidates, *FALLBACKS]:
            if splits != (1,):
                params = {**params, "dv_splits": next(
                    (s for s in splits if self._fits(params, s, problem, caps)), splits[-1])}
            row_tiles = -(-rows // params["bq"])
            groups = (problem.batch * problem.heads_kv * row_tiles
                      * params.get("dv_splits", 1))
            chunk = params["kv_chunk"]
            # Halving a power-of-two multiple of BK keeps it one.
            while (chunk > params["bk"]
                   and groups * -(-problem.kv_len // chunk) < caps.compute_units):
                chunk //= 2
            fitted.append({**params, "kv_chunk": chunk})
        return self._first_valid(fitted, problem, caps)

    def _fits(self, params: Mapping[str, Any], dv_splits: int, problem: ProblemSpec,
              caps: DeviceCaps) -> bool:
        config = self.config_from_params(problem, {**params, "dv_splits": dv_splits})
        return self.invalid_reason(config, problem, caps) is None

    def plan(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps, *,
        scale: float | None = None,
    ) -> LaunchPlan:
        """Two launches: split over (batch * heads_kv, row_tiles * chunks * dv_splits * items),
        local (1, items), items = sg_q * sg_k * 16; combine over (batch * heads_kv * rows, Dv),
        local (1, 16). Scratch: partial O and (m, l) of every padded row of every chunk.

        Raises:
            InvalidConfig: if the config is invalid (with the reason).
        """
        self.require_valid(config, problem, caps)
        kv_chunk = int(config.knob("kv_chunk"))
        items = self.work_group_items(config)
        rows = problem.q_len * problem.group_size
        row_tiles = -(-rows // config.bq)
        chunks = -(-problem.kv_len // kv_chunk)
        heads = problem.batch * problem.heads_kv
        split, combine = split_kv_launches(
            self.kernel_names, problem, self.qscale(problem, scale), kv_chunk,
            split_global=(heads, row_tiles * chunks * int(config.knob("dv_splits", 1)) * items),
            split_local=(1, items),
            combine_global=(heads * rows, problem.head_dim_v), combine_local=(1, SUBGROUP))
        partials = heads * chunks * row_tiles * config.bq
        scratch = {"part_o": 4 * partials * problem.head_dim_v, "part_ml": 8 * partials}
        return LaunchPlan(self.source_file, self.kernel_names,
                          self.defines(config, problem, caps), (split, combine), scratch,
                          needs_intel_gpu=uses_native_builtins(caps))
