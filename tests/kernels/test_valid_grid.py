"""The valid grid (every rule judged over the whole space at once) against the per-config rule.

A family's rules are written once and serve both ``invalid_reason`` (one config) and
``valid_grid`` (the space). These tests walk every point of each space the slow way, making its
config and asking ``invalid_reason``, and require the grid to hold exactly the accepted points,
in ``itertools.product`` order, and ``valid_configs`` to make exactly their configs: a study's
trial indices address configs by that order.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import CPU_CAPS

from xe2tune.kernels import (
    DeviceCaps,
    FamilyUnion,
    KernelFamily,
    PrefillFamily,
    ProblemSpec,
    catalog_device,
    get_family,
)
from xe2tune.tuner._study import valid_space

B580 = catalog_device("b580").caps


def _problem(mode: str, head_dim: int, dtype: str, **kw: object) -> ProblemSpec:
    lengths = (1, 4096) if mode == "decode" else (256, 256)
    return ProblemSpec(mode, head_dim, dtype, *lengths, **kw)  # type: ignore[arg-type]


# (family, problem, caps): every mode, dtype and K/V variant the rules read, both GRF models of
# the xmx families, and an xmx space the device rejects whole.
CASES = {
    "prefill-fp16-gqa": ("sdpa_prefill", _problem("prefill", 128, "fp16", heads_q=8, heads_kv=2),
                         CPU_CAPS),
    "prefill-fp32-192-dv128": ("sdpa_prefill", _problem("prefill", 192, "fp32", head_dim_v=128),
                               CPU_CAPS),
    "decode-bf16-gqa": ("sdpa_decode", _problem("decode", 128, "bf16", heads_q=4, heads_kv=2),
                        CPU_CAPS),
    "decode-mla576-e4m3": ("sdpa_decode", _problem("decode", 576, "fp16", head_dim_v=512,
                                                   kv_dtype="e4m3", heads_q=2, heads_kv=1),
                           CPU_CAPS),
    "xmx-prefill-b580": ("sdpa_xmx_prefill", _problem("prefill", 128, "fp16"), B580),
    "xmx-decode-b580-e4m3": ("sdpa_xmx_decode", _problem("decode", 128, "bf16", kv_dtype="e4m3",
                                                         heads_q=8, heads_kv=2), B580),
    "xmx-decode-b580-mla576": ("sdpa_xmx_decode", _problem("decode", 576, "bf16",
                                                           head_dim_v=512, heads_q=16), B580),
    "xmx-prefill-cpu-stated": ("sdpa_xmx_prefill", _problem("prefill", 64, "bf16"), CPU_CAPS),
}


def _accepted_the_slow_way(family: KernelFamily, problem: ProblemSpec,
                           caps: DeviceCaps) -> tuple[list[int], list]:
    """Flat product positions and configs of the points ``invalid_reason`` accepts."""
    space = family.parameter_space(problem)
    positions, configs = [], []
    for i, values in enumerate(itertools.product(*space.values())):
        config = family.config_from_params(problem, dict(zip(space, values, strict=True)))
        if family.invalid_reason(config, problem, caps) is None:
            positions.append(i)
            configs.append(config)
    return positions, configs


def _check_grid(family: KernelFamily, problem: ProblemSpec, caps: DeviceCaps) -> int:
    positions, configs = _accepted_the_slow_way(family, problem, caps)
    grid = family.valid_grid(problem, caps)
    assert dict(grid.space) == {n: tuple(v) for n, v in family.parameter_space(problem).items()}
    shape = [len(v) for v in grid.space.values()]
    flat = np.ravel_multi_index(grid.ordinals.T, shape) if len(grid) else np.empty(0, int)
    assert flat.tolist() == positions
    assert list(family.valid_configs(problem, caps)) == configs
    return len(configs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_valid_grid_is_the_per_config_rule_on_every_point(case):
    name, problem, caps = CASES[case]
    assert _check_grid(get_family(name), problem, caps) > 0


class _PrefillWithoutPacking(PrefillFamily):
    """A space without the kv_pack knob: its configs hold the knob's default (False)."""

    name = "sdpa_prefill_unpacked"

    def parameter_space(self, problem):
        return {n: v for n, v in super().parameter_space(problem).items() if n != "kv_pack"}


def test_valid_grid_holds_a_knob_the_space_leaves_out_at_its_default():
    assert _check_grid(_PrefillWithoutPacking(), _problem("prefill", 64, "fp16"), CPU_CAPS) > 0


@pytest.mark.requires_xpu
def test_valid_grid_on_the_live_cpu_device(cpu_caps):
    # The xmx family as this process's runtime sees it (it may reject the whole space), and the
    # vector-lane decode family with the live device's limits.
    _check_grid(get_family("sdpa_xmx_prefill"), _problem("prefill", 128, "fp16"), cpu_caps)
    _check_grid(get_family("sdpa_decode"),
                _problem("decode", 128, "fp16", heads_q=2, heads_kv=1), cpu_caps)


def test_union_grid_is_its_members_grids_in_order():
    problem = _problem("decode", 64, "fp16", heads_q=2, heads_kv=1)
    union = FamilyUnion([get_family("sdpa_decode"), get_family("sdpa_xmx_decode")], problem)
    members = [c for m in union.members for c in m.valid_configs(problem, CPU_CAPS)]
    assert list(union.valid_configs(problem, CPU_CAPS)) == members
    space, configs = valid_space(union, problem, CPU_CAPS)
    assert list(configs) == members
    for i in range(0, len(members), 97):
        assert space.index(union.params_from_config(members[i])) == i


def test_study_space_maps_every_index_to_its_config():
    name, problem, caps = CASES["xmx-prefill-b580"]
    family = get_family(name)
    space, configs = valid_space(family, problem, caps)
    made = list(family.valid_configs(problem, caps))
    assert len(space) == len(configs) == len(made)
    for i, config in enumerate(made):
        params = family.params_from_config(config)
        assert space.index(params) == i and space.config(i) == params and configs[i] == config
    assert configs[-1] == made[-1] and configs[2:5] == made[2:5]
    with pytest.raises(IndexError):
        configs[len(made)]


def test_a_rule_reading_an_undeclared_parameter_fails_loudly():
    from xe2tune.kernels import Rule
    from xe2tune.kernels._rules import grid_mask

    sloppy = Rule(("bq",), lambda p: None if p["bq"] % p["rows_per_item"] == 0 else "no")
    with pytest.raises(KeyError):
        grid_mask({"bq": (8, 16), "rows_per_item": (1, 3)}, [sloppy])
