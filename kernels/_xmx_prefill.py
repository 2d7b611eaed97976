"""The xmx prefill family: flash-attention forward on matrix engines (sdpa_xmx_prefill.cpp)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xe2tune.kernels._baselines import xmx_baseline_params
from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import KernelLaunch, LaunchPlan
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._sdpa_family import kv_scale_args
from xe2tune.kernels._xmx_family import XmxFamilyBase, uses_native_builtins


def _shape(bq: int, bk: int, bd: int, bv: int, sg_q: int, sg_k: int, stages: int = 2,
           grf: int = 256) -> dict[str, int]:
    return {"bq": bq, "bk": bk, "bd": bd, "bv": bv, "sg_q": sg_q, "sg_k": sg_k,
            "stages": stages, "grf": grf}


# After the published configs of the head dim (kernels/_baselines.py; SageV1 first for 128):
# 8 rows per subgroup suits every head dim with 256 registers (hd256: 174 of them); then a
# small tile for devices without a GRF model (the emulated built-ins on a CPU, where each extra
# fragment costs build time).
FALLBACKS: tuple[dict[str, int], ...] = (
    _shape(128, 32, 32, 32, 16, 1),
    _shape(16, 32, 32, 32, 2, 1, stages=1, grf=128),
)


class XmxPrefillFamily(XmxFamilyBase):
    """Prefill: one work-group per BQ rows (query positions x GQA group heads) per KV head."""

    name = "sdpa_xmx_prefill"
    mode = "prefill"
    source_file = "sdpa_xmx_prefill.cpp"
    kernel_names = ("xe2t_xmx_prefill",)

    def parameter_space(self, problem: ProblemSpec) -> Mapping[str, Sequence[Any]]:
        """The Cartesian space: parameter name -> candidate values, for this problem.

        Raises:
            InvalidProblem: if the problem is not an fp16/bf16 prefill problem.
        """
        self._check_problem(problem)
        return {
            "bq": (8, 16, 32, 64, 128, 256),
            "bk": (16, 32, 64, 128, 256),
            "bd": (16, 32, 64),
            "bv": (16, 32, 64),
            "sg_q": (1, 2, 4, 8, 16, 32),
            "sg_k": (1, 2, 4, 8, 16),
            "stages": (0, 1, 2, 3),
            "grf": (128, 256),
        }

    def default_config(self, problem: ProblemSpec, caps: DeviceCaps) -> LauncherConfig:
        """The head dim's first valid baseline (SageV1 for 128), else the first valid fallback.

        Raises:
            InvalidProblem: if the family cannot serve the problem or no config fits the device.
        """
        self._check_problem(problem)
        candidates = [p for _, p in xmx_baseline_params(self.mode, problem.head_dim)]
        return self._first_valid([*candidates, *FALLBACKS], problem, caps)

    def plan(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps, *,
        scale: float | None = None,
    ) -> LaunchPlan:
        """One launch: global (batch * heads_kv, row_tiles * items), local (1, items), items =
        sg_q * sg_k * 16.

        Raises:
            InvalidConfig: if the config is invalid (with the reason).
        """
        self.require_valid(config, problem, caps)
        items = self.work_group_items(config)
        row_tiles = -(-problem.q_len * problem.group_size // config.bq)
        launch = KernelLaunch(
            kernel=self.kernel_names[0],
            args=("q", "k", "v", "o", problem.q_len, problem.kv_len, problem.heads_q,
                  problem.heads_kv, self.qscale(problem, scale), int(problem.causal),
                  *kv_scale_args(problem)),
            arg_types=("buffer",) * 4 + ("int",) * 4 + ("float", "int")
            + ("buffer",) * len(kv_scale_args(problem)),
            global_size=(problem.batch * problem.heads_kv, row_tiles * items),
            local_size=(1, items),
        )
        return LaunchPlan(self.source_file, self.kernel_names,
                          self.defines(config, problem, caps), (launch,), {},
                          needs_intel_gpu=uses_native_builtins(caps))
