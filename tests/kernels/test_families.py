"""Device descriptions, families chosen by device capability, and the union of their spaces."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import CPU_CAPS

from xe2tune.errors import InvalidConfig
from xe2tune.kernels import (
    DecodeFamily,
    FamilyUnion,
    PrefillFamily,
    ProblemSpec,
    catalog_device,
    device_catalog,
    families_for,
    family_for,
    family_for_mode,
    family_source_hash,
    search_family,
    source_hash,
)
from xe2tune.tuner import FiniteSpace

PREFILL = ProblemSpec("prefill", 128, "fp16", 256, 256, heads_q=8, heads_kv=2)
DECODE = ProblemSpec("decode", 128, "fp16", 1, 4096, heads_q=32, heads_kv=8)


def test_catalog_has_the_xe2_gpus_with_their_limits():
    keys = {d.key for d in device_catalog()}
    assert {"b580", "b570", "arc140v", "a770", "max1550"} <= keys
    b580 = catalog_device("B580").caps
    assert (b580.is_intel_gpu, b580.has_matrix_engine) == (True, True)
    assert b580.sub_group_sizes == (16, 32) and b580.local_mem_bytes == 128 * 1024
    assert b580.registers_per_thread == (128, 256) and b580.max_work_items_large_grf == 512
    assert b580.matrix_shape == (8, 16, 16)
    assert catalog_device("lnl").caps.name == catalog_device("arc140v").caps.name
    assert catalog_device("a770").caps.matrix_shape == (8, 8, 16)  # Xe-HPG DPAS is SIMD8


def test_unknown_catalog_device_is_one_line_listing_the_keys():
    with pytest.raises(InvalidConfig) as err:
        catalog_device("b999")
    assert "b580" in str(err.value) and "\n" not in str(err.value)


def test_cli_lists_the_catalog_as_json():
    out = subprocess.run(["xe2tune", "devices", "--catalog", "--json"], capture_output=True,
                         text=True, check=True)
    rows = {r["key"]: r for r in json.loads(out.stdout)}
    assert rows["b580"]["peaks"]["tflops"]["fp16"] == pytest.approx(116.7)
    assert rows["b580"]["registers_per_thread"] == [128, 256]


@pytest.fixture
def cpu_caps_stated():
    return CPU_CAPS


class _SmallPrefill(PrefillFamily):
    """The prefill kernels over a small space, so the union's mapping is checked exhaustively."""

    name = "sdpa_prefill_small"

    def parameter_space(self, problem):
        return {**super().parameter_space(problem), "bq": (32, 64), "bd": (16,), "bv": (16, 32),
                "stages": (1,), "rows_per_item": (4, 8)}


class _SecondPrefill(_SmallPrefill):
    """The same kernels under another name, without the kv_pack parameter (it reads False)."""

    name = "sdpa_prefill_second"

    def parameter_space(self, problem):
        space = dict(super().parameter_space(problem))
        del space["kv_pack"]
        return {**space, "bk": (32, 64)}


def test_union_space_maps_every_config_of_every_member_both_ways(cpu_caps_stated):
    union = FamilyUnion((_SmallPrefill(), _SecondPrefill()), PREFILL)
    space = union.parameter_space(PREFILL)
    assert space["family"] == ["sdpa_prefill_small", "sdpa_prefill_second"]
    assert space["kv_pack"] == [False, True, None]
    configs = list(union.valid_configs(PREFILL, cpu_caps_stated))
    members = [list(m.valid_configs(PREFILL, cpu_caps_stated)) for m in union.members]
    assert len(configs) == sum(map(len, members)) > 0
    finite = FiniteSpace.from_params(space, [union.params_from_config(c) for c in configs])
    assert len(finite) == len(configs)
    for config in configs:
        params = union.params_from_config(config)
        assert (params["kv_pack"] is None) == (config.family == "sdpa_prefill_second")
        assert union.config_from_params(PREFILL, params) == config
        assert union.invalid_reason(config, PREFILL, cpu_caps_stated) is None
        assert union.plan(config, PREFILL, cpu_caps_stated).source_file == "sdpa_prefill.cpp"
    assert union.default_config(PREFILL, cpu_caps_stated).family == "sdpa_prefill_small"


def test_union_rejects_a_config_of_a_family_it_does_not_hold(cpu_caps_stated):
    union = FamilyUnion((_SmallPrefill(), _SecondPrefill()), PREFILL)
    foreign = DecodeFamily().default_config(DECODE, cpu_caps_stated)
    assert "not one of" in union.invalid_reason(foreign, PREFILL, cpu_caps_stated)
    with pytest.raises(ValueError):
        FamilyUnion((PrefillFamily(), DecodeFamily()), PREFILL)


def test_union_source_hash_changes_with_any_member():
    union = FamilyUnion((PrefillFamily(), _SecondPrefill()), PREFILL)
    assert family_source_hash(PrefillFamily()) == source_hash("sdpa_prefill.cpp")
    assert family_source_hash(union) != family_source_hash(PrefillFamily())


def test_cpu_device_searches_only_the_vector_lane_families(cpu_caps_stated):
    assert [f.name for f in families_for(PREFILL, cpu_caps_stated)] == ["sdpa_prefill"]
    assert search_family(DECODE, cpu_caps_stated).name == "sdpa_decode"
    assert family_for(PREFILL, cpu_caps_stated).name == "sdpa_prefill"
    with pytest.raises(InvalidConfig):
        family_for(PREFILL, cpu_caps_stated, "no_such_family")


@pytest.mark.requires_xpu
def test_live_cpu_caps_report_the_runtime_truthfully(cpu_caps):
    # This process's CPU runtime started with CL_CONFIG_CPU_VECTORIZER_MODE=1 (xe2tune's
    # default), which forbids kernels with a required subgroup size.
    assert cpu_caps.required_subgroup_size_ok is False
    assert cpu_caps.is_intel_gpu is False and cpu_caps.registers_per_thread == ()
    # The runtime's own answer for ext_intel_matrix; no CPU seen here has reported it.
    assert cpu_caps.has_matrix_engine == ("ext_intel_matrix" in cpu_caps.aspects)


XE2_COUNTS = {  # valid xmx configs of hd128 fp16 (prefill, GQA decode): the Xe2 rules are shared
    "b580": (5556, 3537), "b570": (5556, 3537), "arc140v": (5556, 3537),
}


@pytest.mark.parametrize("key", sorted(XE2_COUNTS))
def test_xe2_catalog_devices_search_the_matrix_family_alone(key):
    caps = catalog_device(key).caps
    decode = ProblemSpec("decode", 128, "fp16", 1, 4096, heads_q=32, heads_kv=8)
    for problem, count in zip((PREFILL, decode), XE2_COUNTS[key], strict=True):
        family = search_family(problem, caps)
        xmx = family  # the vector-lane family spills on Xe2: not searched there
        assert xmx.needs_matrix_engine and xmx.mode == problem.mode
        assert family_for(problem, caps, family_for_mode(problem.mode).name).mode == problem.mode
        assert sum(1 for _ in xmx.valid_configs(problem, caps)) == count
        assert family.default_config(problem, caps).family == xmx.name
        valid = [b.label for b in family.baselines(problem, caps)
                 if family.invalid_reason(b.config, problem, caps) is None]
        assert "SYCL*TLA example" in valid
    sage = [b for b in search_family(PREFILL, caps).baselines(PREFILL, caps)
            if b.label == "seed 000 SageV1"]
    assert len(sage) == 1 and search_family(PREFILL, caps).invalid_reason(
        sage[0].config, PREFILL, caps) is None


def test_fp32_on_a_b580_is_the_vector_lane_family_alone():
    caps = catalog_device("b580").caps
    problem = ProblemSpec("prefill", 128, "fp32", 512, 512)
    assert [f.name for f in families_for(problem, caps)] == ["sdpa_prefill"]
